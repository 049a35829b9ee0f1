"""The running process: the composition root, the daemon and what checks it.

`wiring` builds every long-lived object from `Settings` (the one composition root)
and `transport_choice` picks the transport there; `daemon` runs the loops, the HTTP
server, signals and systemd's notify protocol (`systemd`); `doctor` checks a set-up
and `probe` asks whether the daemon on the dashboard port is our own.
"""
