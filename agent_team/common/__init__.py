"""Small helpers every layer may use; they depend on nothing of ours but `exceptions`.

Redaction of secrets, JSON from outside parsed within bounds, log lines nobody can
forge, times as people read them, the command hint a person can type, and the
hooks the crash and clock tests drive a real process with. Kept free of imports
here, so importing one helper never loads the others.
"""
