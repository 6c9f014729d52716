import django.db.models.deletion
import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("holds", "0005_hold_variant"),
        ("shop", "0015_drop_join_work_on_by_default"),
    ]

    operations = [
        migrations.CreateModel(
            name="PresaleCode",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("code", models.CharField(max_length=32)),
                (
                    "max_uses",
                    models.PositiveIntegerField(
                        default=1, help_text="Claims this code admits; 1 = single-use."
                    ),
                ),
                ("uses", models.PositiveIntegerField(default=0, editable=False)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "drop",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="presale_codes",
                        to="shop.drop",
                    ),
                ),
            ],
            options={
                "ordering": ["drop", "id"],
            },
        ),
        migrations.AddField(
            model_name="hold",
            name="presale_code",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="holds",
                to="holds.presalecode",
            ),
        ),
        migrations.CreateModel(
            name="PresaleListEntry",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("email", models.EmailField(max_length=254)),
                (
                    "drop",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="presale_list",
                        to="shop.drop",
                    ),
                ),
            ],
            options={
                "verbose_name_plural": "presale list entries",
                "ordering": ["drop", "email"],
            },
        ),
        migrations.AddConstraint(
            model_name="presalecode",
            constraint=models.UniqueConstraint(fields=("drop", "code"), name="holds_presalecode_drop_code"),
        ),
        migrations.AddConstraint(
            model_name="presalecode",
            constraint=models.CheckConstraint(
                condition=models.Q(("max_uses__gte", 1)),
                name="holds_presalecode_max_uses_positive",
                violation_error_message="A code admits at least one claim.",
            ),
        ),
        migrations.AddConstraint(
            model_name="presalecode",
            constraint=models.CheckConstraint(
                condition=models.Q(("uses__lte", models.F("max_uses"))),
                name="holds_presalecode_uses_within_max",
            ),
        ),
        migrations.AddConstraint(
            model_name="presalelistentry",
            constraint=models.UniqueConstraint(
                fields=("drop", "email"), name="holds_presalelistentry_drop_email"
            ),
        ),
        migrations.AddConstraint(
            model_name="presalelistentry",
            constraint=models.CheckConstraint(
                condition=models.Q(("email", django.db.models.functions.text.Lower("email"))),
                name="holds_presalelistentry_lower",
            ),
        ),
    ]
