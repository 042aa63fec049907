"""Writes a matplotlib figure atomically, for scripts/plot_runs.py and scripts/plot_spectrum.py.

The picture goes to a hidden temporary file beside OUT, is flushed to disk and then renamed over OUT, so a write
that fails part way (a full disk, a quota, a file-size limit) leaves OUT as it was, never a truncated picture, and
removes the temporary file. The new file gets the permissions a plain open() would give it (0666 less the umask).
"""
import os
import tempfile


def save_figure(fig, out, dpi):
    """fig.savefig(out) in the format of OUT's extension, atomically; raises OSError when it cannot be written."""
    directory = os.path.dirname(os.path.abspath(out))
    ext = os.path.splitext(out)[1]
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(out) + ".", suffix=ext, dir=directory)
    except OSError as e:  # said without the temporary file's name (the callers name OUT)
        raise OSError(e.errno, e.strerror or str(e)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, dpi=dpi, format=ext.lstrip(".").lower())
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp made it 0600
        os.replace(tmp, out)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):  # said without the temporary file's name (the callers name OUT)
            raise OSError(e.errno, e.strerror or str(e)) from None
        raise
