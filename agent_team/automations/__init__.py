"""Scheduled automations: task templates on a schedule, behind a claim gate and a budget gate."""
