"""What the running parts report about themselves: loops, their health, readiness, checks.

The daemon's supervised loops (`loops.Loop`) beat into `status.Health`; `/healthz`,
`/readyz` (`readiness`), systemd's watchdog and `doctor` read it. `checks` holds
the types of a doctor check, which the integrations return without importing
the doctor that runs them. Everything here sits below the coordinator and the
integrations, so any of them may report without importing the daemon.
"""
