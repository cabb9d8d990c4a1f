"""The stages of one evaluation, a file each, in the order evaluation/judge.py runs them:

static -> reference -> load -> correctness -> timing -> own_code (CPU) or profile -> ncu (opt-in).

Each is a function of the evaluation's state (evaluation/state.py) that returns, or ends the evaluation with
a finding of the rules catalogue (evaluation/outcome.py, evaluation/rules.py). The stages run the solution
only through evaluation/batch.py and talk to the two processes only through evaluation/conversation.py.
"""
