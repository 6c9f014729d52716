import django.db.models.deletion
from django.db import migrations, models

# The drop's own index on tickets is covered by both unique constraints, which lead with the drop.
# Only the index goes: Django's AlterField would also drop and re-add the foreign key, whose
# re-check of every ticket blocks joins while it runs.
INDEX = "admission_ticket_drop_id_25338242"


class Migration(migrations.Migration):
    dependencies = [
        ("admission", "0005_verbose_names_translatable"),
        ("shop", "0019_verbose_names_translatable"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="ticket",
                    name="drop",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tickets",
                        to="shop.drop",
                        verbose_name="drop",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{INDEX}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{INDEX}" ON "admission_ticket" ("drop_id")',
                ),
            ],
        ),
    ]
