"""Orders ship with a carrier and a tracking number; Merchants may mark them (ship_order)."""

from django.conf import settings
from django.db import migrations, models


def grant(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally made after all migrations; the grant needs this one now.
    config = apps.get_app_config("checkout")
    config.models_module = True
    create_permissions(config, verbosity=0)
    config.models_module = None
    Permission = apps.get_model("auth", "Permission")
    ship = Permission.objects.get(content_type__app_label="checkout", codename="ship_order")
    for group in apps.get_model("auth", "Group").objects.filter(name="Merchants"):
        group.permissions.add(ship)


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    for ship in Permission.objects.filter(content_type__app_label="checkout", codename="ship_order"):
        ship.group_set.clear()


class Migration(migrations.Migration):
    dependencies = [
        ("checkout", "0011_failure_reason_codes"),
        ("holds", "0007_verbose_names_translatable"),
        ("shop", "0019_verbose_names_translatable"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="order",
            options={
                "ordering": ["-created_at"],
                "permissions": [
                    ("refund_order", "Can refund orders and put their units back on sale"),
                    ("ship_order", "Can mark orders shipped with a carrier and tracking number"),
                ],
                "verbose_name": "order",
                "verbose_name_plural": "orders",
            },
        ),
        migrations.AddField(
            model_name="order",
            name="carrier",
            field=models.CharField(blank=True, default="", max_length=20, verbose_name="carrier"),
        ),
        migrations.AddField(
            model_name="order",
            name="shipped_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="shipped at"),
        ),
        migrations.AddField(
            model_name="order",
            name="tracking_number",
            field=models.CharField(blank=True, default="", max_length=40, verbose_name="tracking number"),
        ),
        migrations.AddConstraint(
            model_name="order",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("carrier", ""), ("shipped_at__isnull", True), ("tracking_number", "")),
                    models.Q(
                        ("shipped_at__isnull", False),
                        models.Q(("carrier", ""), _negated=True),
                        models.Q(("tracking_number", ""), _negated=True),
                    ),
                    _connector="OR",
                ),
                name="checkout_order_shipment_whole",
            ),
        ),
        migrations.RunPython(grant, revoke),
    ]
