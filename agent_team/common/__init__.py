"""Small helpers every layer may use; they depend on nothing of ours but `exceptions`.

Redaction of secrets, JSON from outside parsed within bounds, log lines nobody can
forge, times as people read them, the command hint a person can type, the
hooks the crash and clock tests drive a real process with, which repository a
task names (`repo_spec`) and the GitHub git host with its token's header
(`git_host`). Kept free of imports here, so importing one helper never loads
the others.
"""
