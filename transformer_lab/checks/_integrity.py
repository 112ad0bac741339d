"""Old name of :mod:`transformer_lab.checks._guards`, kept so that older imports still work."""

import sys

from transformer_lab.checks import _guards

sys.modules[__name__] = _guards
