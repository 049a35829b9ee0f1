"""The read side: what a task, its journey and the team's open work look like to a person.

`task` builds the drill-down that `agent-team show`, `/api/task` and the task page
share; `journey` folds transitions into steps; `plandiff` compares the plans a
task was asked to approve; `pull_request` folds a task's pull request, its
events and its gates into a timeline by round; `triage` lists what needs a
person now; `build_watch` follows a running build's output. Nothing here writes.
"""
