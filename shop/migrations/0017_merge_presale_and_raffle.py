from django.db import migrations


class Migration(migrations.Migration):
    """The presale window and the raffle flag were added side by side; neither needs the other."""

    dependencies = [
        ("shop", "0016_drop_presale_starts_at"),
        ("shop", "0016_drop_raffle"),
    ]

    operations = []
