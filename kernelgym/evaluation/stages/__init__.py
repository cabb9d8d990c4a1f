"""The stages of one evaluation, a file each, in the order evaluation/judge.py runs them:

static -> reference -> load -> correctness -> timing -> own_code (CPU) or profile -> ncu (opt-in).

Each is a function of the evaluation's state (evaluation/state.py) that returns, or ends the evaluation with
a finding of the rules catalogue (evaluation/outcome.py, evaluation/rules.py). Every batch of the solution's
calls goes through evaluation/batch.py; what the worker sends and receives (the candidate's builds served on
the way, its failures named) through evaluation/conversation.py.
"""
