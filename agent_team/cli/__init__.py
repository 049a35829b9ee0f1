"""The `agent-team` command line (typer): `main` holds the app and the core commands.

Bigger command groups live in modules of their own (`automation`, `inbox` for
`inbox` and `audit`) and share `support`, so no command module imports another.
"""
