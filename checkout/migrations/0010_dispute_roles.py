"""Merchants and on-call see disputes (they answer them at the provider); nobody edits them here."""

from django.db import migrations

GROUPS = ["Merchants", "On-call"]


def grant(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally made after all migrations; the grant needs this model's now.
    config = apps.get_app_config("checkout")
    config.models_module = True
    create_permissions(config, verbosity=0)
    config.models_module = None
    Permission = apps.get_model("auth", "Permission")
    view = Permission.objects.get(content_type__app_label="checkout", codename="view_dispute")
    for group in apps.get_model("auth", "Group").objects.filter(name__in=GROUPS):
        group.permissions.add(view)


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    for view in Permission.objects.filter(content_type__app_label="checkout", codename="view_dispute"):
        view.group_set.remove(*apps.get_model("auth", "Group").objects.filter(name__in=GROUPS))


class Migration(migrations.Migration):
    dependencies = [("checkout", "0009_dispute"), ("shop", "0003_roles")]

    operations = [migrations.RunPython(grant, revoke)]
