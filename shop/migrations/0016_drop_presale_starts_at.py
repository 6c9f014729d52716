from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("shop", "0015_drop_join_work_on_by_default"),
    ]

    operations = [
        migrations.AddField(
            model_name="drop",
            name="presale_starts_at",
            field=models.DateTimeField(
                blank=True,
                help_text="Optional. From then until the start, only buyers with a presale code or on the "
                "drop's presale list can reserve. First-come drops only (not with a waiting room).",
                null=True,
                verbose_name="presale starts at",
            ),
        ),
        migrations.AddConstraint(
            model_name="drop",
            constraint=models.CheckConstraint(
                condition=models.Q(("presale_starts_at__isnull", True))
                | models.Q(("presale_starts_at__lt", models.F("starts_at"))),
                name="shop_drop_presale_before_start",
                violation_error_message="The presale must start before the drop's public start.",
            ),
        ),
        migrations.AddConstraint(
            model_name="drop",
            constraint=models.CheckConstraint(
                condition=models.Q(("presale_starts_at__isnull", True)) | models.Q(("waiting_room", False)),
                name="shop_drop_presale_first_come",
                violation_error_message="A presale is for first-come drops: turn the waiting room off "
                "or leave the presale start empty.",
            ),
        ),
    ]
