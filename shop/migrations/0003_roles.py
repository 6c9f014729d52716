"""Merchant and on-call groups: merchants configure drops, on-call pauses them and watches."""

from django.db import migrations

MERCHANT = "Merchants"
ON_CALL = "On-call"
MERCHANT_PERMISSIONS = [
    ("shop", "add_product"),
    ("shop", "change_product"),
    ("shop", "view_product"),
    ("shop", "add_drop"),
    ("shop", "change_drop"),
    ("shop", "view_drop"),
    ("holds", "view_hold"),
    ("checkout", "view_order"),
]
ON_CALL_PERMISSIONS = [
    ("shop", "view_drop"),
    ("shop", "pause_drop"),
    ("shop", "view_pauseevent"),
    ("holds", "view_hold"),
    ("checkout", "view_order"),
]


def create_groups(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally made after all migrations; the groups need them now.
    for config in apps.get_app_configs():
        config.models_module = True
        create_permissions(config, verbosity=0)
        config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, wanted in [(MERCHANT, MERCHANT_PERMISSIONS), (ON_CALL, ON_CALL_PERMISSIONS)]:
        group, _ = Group.objects.get_or_create(name=name)
        for app_label, codename in wanted:
            group.permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=[MERCHANT, ON_CALL]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("shop", "0002_pause_events"),
        ("holds", "0001_hold"),
        ("checkout", "0001_orders_payments_outbox"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
