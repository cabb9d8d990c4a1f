"""Not a package: the root of the kernelgym repository.

Python imports this file as `kernelgym` only when the working directory holds the checkout under that name
(for example right after `git clone`), which hides the installed package and would otherwise give an empty
package that registers no environment. Fail at once and say what happened.
"""

import os as _os

raise ImportError(
    f"`import kernelgym` found the kernelgym repository folder {_os.path.dirname(_os.path.abspath(__file__))} "
    "in the working directory instead of the installed package. Run Python from inside the checkout "
    "(cd into it) or from any other directory."
)
