from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("shop", "0015_drop_join_work_on_by_default"),
    ]

    operations = [
        migrations.AddField(
            model_name="drop",
            name="raffle",
            field=models.BooleanField(
                default=False,
                help_text="Raffle: entries are taken until the start, then drawn; the first ranked get a unit "
                "each to pay for within the offer time, and an unpaid win passes to the next ranked entry.",
            ),
        ),
        migrations.AddConstraint(
            model_name="drop",
            constraint=models.CheckConstraint(
                condition=models.Q(("raffle", False), ("waiting_room", True), _connector="OR"),
                name="shop_drop_raffle_has_waiting_room",
                violation_error_message="A raffle takes its entries through the waiting room; turn it on.",
            ),
        ),
    ]
