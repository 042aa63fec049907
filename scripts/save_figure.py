"""Writes a matplotlib figure atomically, for scripts/plot_runs.py and scripts/plot_spectrum.py.

The picture goes to a hidden temporary file beside OUT, is flushed to disk and then renamed over OUT, so a write
that fails part way (a full disk, a quota, a file-size limit) leaves OUT as it was, never a truncated picture, and
removes the temporary file. The new file gets the permissions a plain open() would give it (0666 less the umask).
An earlier picture at OUT is replaced; anything else there is not (other_file_at says why, for the callers to refuse).
"""
import os
import stat
import tempfile

# the first bytes of the formats whose files say what they are (other formats: any regular file is replaced)
_MAGIC = {"png": b"\x89PNG", "pdf": b"%PDF", "jpg": b"\xff\xd8", "jpeg": b"\xff\xd8", "eps": b"%!PS", "ps": b"%!PS"}


def other_file_at(out):
    """None when OUT may be written: nothing there, an empty file, or an earlier picture of OUT's format; else the reason
    (a pipe or device, which the rename would replace by a file; a file that is not such a picture: someone's)."""
    try:
        st = os.stat(out)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot check what is there: {e.strerror}"
    if stat.S_ISDIR(st.st_mode):
        return "that is a directory"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a pipe or a device): writing the picture would replace it"
    if st.st_size == 0:  # (an empty file holds nothing to lose: touch, mktemp --suffix .png)
        return None
    ext = os.path.splitext(out)[1].lstrip(".").lower()
    try:
        with open(out, "rb") as f:
            head = f.read(1024)
    except OSError as e:
        return f"cannot read what is there: {e.strerror}"
    is_picture = head.startswith(_MAGIC[ext]) if ext in _MAGIC else (b"<svg" in head if ext == "svg" else True)
    if not is_picture:
        return (f"exists and is not a .{ext} picture (not an earlier plot): left as it is; pass another path, or "
                f"remove it")
    return None


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
