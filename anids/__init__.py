__version__ = "0.1.0"
# OpenMP threads that wait for work sleep instead of spinning (libgomp's default spins for a while): on a machine with
# other busy processes, a spinning torch thread takes a core from them and a training step becomes several times
# slower. The OpenMP runtime reads this once, when torch loads it, so it is set here, before any anids module imports
# torch (it has no effect if torch was imported first); a value the user set is kept.
import os as _os
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
