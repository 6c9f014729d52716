"""The shop's identity (one row) and its legal pages per language; merchants may edit both."""

from decimal import Decimal

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models

# Merchants set up their own shop: its identity and its legal pages (shop.admin).
MERCHANT_PERMISSIONS = [
    "add_shopsettings",
    "change_shopsettings",
    "view_shopsettings",
    "change_legaltext",
    "view_legaltext",
]


def grant(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally made after all migrations; the grant needs these models' now.
    config = apps.get_app_config("shop")
    config.models_module = True
    create_permissions(config, verbosity=0)
    config.models_module = None
    Permission = apps.get_model("auth", "Permission")
    wanted = Permission.objects.filter(content_type__app_label="shop", codename__in=MERCHANT_PERMISSIONS)
    for group in apps.get_model("auth", "Group").objects.filter(name="Merchants"):
        group.permissions.add(*wanted)


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    for permission in Permission.objects.filter(
        content_type__app_label="shop", codename__in=MERCHANT_PERMISSIONS
    ):
        permission.group_set.remove(*apps.get_model("auth", "Group").objects.filter(name="Merchants"))


class Migration(migrations.Migration):
    dependencies = [
        ("shop", "0019_verbose_names_translatable"),
        ("shop", "0003_roles"),
    ]

    operations = [
        migrations.CreateModel(
            name="ShopSettings",
            fields=[
                (
                    "id",
                    models.PositiveSmallIntegerField(
                        default=1, editable=False, primary_key=True, serialize=False
                    ),
                ),
                (
                    "name",
                    models.CharField(
                        help_text="What buyers call the shop.", max_length=80, verbose_name="shop name"
                    ),
                ),
                (
                    "legal_name",
                    models.CharField(
                        help_text="The seller's registered name, e.g. 'Harbour Lane GmbH'.",
                        max_length=160,
                        verbose_name="legal name",
                    ),
                ),
                ("address", models.TextField(max_length=500, verbose_name="postal address")),
                ("contact_email", models.EmailField(max_length=254, verbose_name="contact e-mail")),
                (
                    "vat_id",
                    models.CharField(
                        blank=True,
                        help_text="Two letters for the country, then 2 to 12 letters or digits, e.g. DE123456789.",
                        max_length=14,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^(?:AT|BE|BG|CY|CZ|DE|DK|EE|EL|ES|FI|FR|HR|HU|IE|IT|LT|LU|LV|MT|NL|PL|PT|RO|SE|SI|SK|XI)(?=[0-9A-Z]*[0-9])[0-9A-Z]{2,12}$",
                                "This is not a VAT ID: two letters of an EU country (e.g. DE), then 2 to 12 letters or digits.",
                            )
                        ],
                        verbose_name="VAT ID",
                    ),
                ),
                (
                    "logo",
                    models.ImageField(
                        blank=True,
                        help_text="PNG, JPEG or WebP, up to 1 MB; shown in the header of every page.",
                        upload_to="shop/",
                        verbose_name="logo",
                    ),
                ),
                (
                    "accent_colour",
                    models.CharField(
                        default="#1f5fbf",
                        help_text="As #RRGGBB, e.g. #1f5fbf.",
                        max_length=7,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^#[0-9a-f]{6}$", "Give the colour as # and six hex digits, e.g. #1f5fbf."
                            )
                        ],
                        verbose_name="accent colour",
                    ),
                ),
                ("support_url", models.URLField(blank=True, verbose_name="support URL")),
                (
                    "prices_include_tax",
                    models.BooleanField(
                        default=True,
                        help_text="On: a product's price is what the buyer pays (tax inside). Off: tax is added at checkout.",
                        verbose_name="prices include tax",
                    ),
                ),
                ("configured_at", models.DateTimeField(blank=True, editable=False, null=True)),
            ],
            options={
                "verbose_name": "shop",
                "verbose_name_plural": "shop",
                "constraints": [
                    models.CheckConstraint(condition=models.Q(("id", 1)), name="shop_shopsettings_one_row")
                ],
            },
        ),
        migrations.CreateModel(
            name="LegalText",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("terms", "Terms of sale"),
                            ("privacy", "Privacy policy"),
                            ("notice", "Legal notice"),
                            ("withdrawal", "Returns and withdrawal"),
                        ],
                        max_length=12,
                        verbose_name="page",
                    ),
                ),
                (
                    "language",
                    models.CharField(
                        choices=[("en", "English"), ("de", "Deutsch")], max_length=8, verbose_name="language"
                    ),
                ),
                (
                    "body",
                    models.TextField(
                        help_text="Plain text: a blank line starts a paragraph, a line starting with '## ' a heading.",
                        max_length=40000,
                        verbose_name="text",
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "shop",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="legal_texts",
                        to="shop.shopsettings",
                    ),
                ),
            ],
            options={
                "verbose_name": "legal page",
                "verbose_name_plural": "legal pages",
                "ordering": ["kind", "language"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("kind", "language"), name="shop_legaltext_one_per_language"
                    )
                ],
            },
        ),
        migrations.AlterField(
            model_name="product",
            name="tax_rate",
            field=models.DecimalField(
                db_default=Decimal("0"),
                decimal_places=2,
                default=Decimal("0"),
                help_text="Percent, e.g. 19.00; 0 for none. Whether prices include it is the shop's setting (Shop: prices include tax).",
                max_digits=5,
                validators=[
                    django.core.validators.MinValueValidator(
                        Decimal("0"),
                        "A tax rate is a percentage from 0 up to (not including) 100, e.g. 19 or 7.7.",
                    ),
                    django.core.validators.MaxValueValidator(
                        Decimal("99.99"),
                        "A tax rate is a percentage from 0 up to (not including) 100, e.g. 19 or 7.7.",
                    ),
                ],
                verbose_name="tax rate (%)",
            ),
        ),
        migrations.RunPython(grant, revoke),
    ]
