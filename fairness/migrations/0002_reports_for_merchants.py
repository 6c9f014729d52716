"""Merchants read their drops' public reports and add a note in the admin; On-call may look."""

from django.db import migrations

GRANTED = {
    "Merchants": ["view_report", "change_report"],
    "On-call": ["view_report"],
}


def grant(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally made after all migrations; the grant needs these now.
    config = apps.get_app_config("fairness")
    config.models_module = True
    create_permissions(config, verbosity=0)
    config.models_module = None
    Permission = apps.get_model("auth", "Permission")
    for name, codenames in GRANTED.items():
        wanted = Permission.objects.filter(content_type__app_label="fairness", codename__in=codenames)
        for group in apps.get_model("auth", "Group").objects.filter(name=name):
            group.permissions.add(*wanted)


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    for name, codenames in GRANTED.items():
        groups = apps.get_model("auth", "Group").objects.filter(name=name)
        for permission in Permission.objects.filter(
            content_type__app_label="fairness", codename__in=codenames
        ):
            permission.group_set.remove(*groups)


class Migration(migrations.Migration):
    dependencies = [("fairness", "0001_public_report"), ("shop", "0003_roles")]

    operations = [migrations.RunPython(grant, revoke)]
