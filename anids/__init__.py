__version__ = "0.1.0"
from . import moved as moved  # the flat package's old module names keep working for a release (with a warning)
