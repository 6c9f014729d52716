from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("holds", "0001_hold"),
    ]

    operations = [
        # '' for the holds made before: their key is honoured for any body, as it was.
        migrations.AddField(
            model_name="hold",
            name="request_digest",
            field=models.CharField(blank=True, db_default="", max_length=64),
        ),
    ]
