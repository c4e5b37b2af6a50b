"""Explain a launch command: parse it the way SGLang's argparse parser would at a version,
then report findings (unknown flags, bad values, deprecations, constraint sites it trips).

One module per step, each pure except `load` (which reads the knowledge base):
`shell` (text -> argv), `parsing` (argv -> flag uses, like argparse), `values` (type,
choices, defaults), `checks` (per-use findings), `sites` (constraint sites), `analysis` (one
command at one version), `ranges` (where the options resolve), `compare` (upgrade check),
`orchestrate` (the `explain` answer the API, the page and the CLI share).
"""

from kb.explain.orchestrate import MAX_COMMAND, MAX_WORDS, CommandRejected, explain

__all__ = ["MAX_COMMAND", "MAX_WORDS", "CommandRejected", "explain"]
