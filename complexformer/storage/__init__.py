"""Storage safety: how the package writes, reads back and checks its files.

- :mod:`~complexformer.storage.safe_paths`: file operations inside a folder the package owns
  that never follow a symbolic link (:class:`SymlinkRefusedError` names the link);
- :mod:`~complexformer.storage.atomic`: atomic writes of files and directories, built beside
  the final name and swapped in (:func:`atomic_write_text`, :func:`atomic_output`,
  :func:`atomic_dir`), and the clean-up after a crash (:func:`remove_stale_temporaries`);
- :mod:`~complexformer.storage.manifest`: the sha256 manifest of a saved directory, written
  last and checked on load (:func:`write_manifest`, :func:`verify_manifest`);
- :mod:`~complexformer.storage.paths`: telling a local path from a hub name before anything is
  downloaded (:func:`require_local_or_hub`).
"""

from .atomic import (
    OLD_PREFIX,
    TMP_PREFIX,
    atomic_dir,
    atomic_output,
    atomic_write,
    atomic_write_text,
    remove_stale_temporaries,
)
from .manifest import (
    FORMAT,
    MANIFEST,
    NO_VERIFY_HINT,
    TOKENIZER_FILES,
    ManifestError,
    file_entry,
    sha256_file,
    update_manifest,
    verify_manifest,
    write_manifest,
    write_manifest_entries,
)
from .paths import looks_local, require_local_or_hub
from .safe_paths import (
    SymlinkRefusedError,
    check_no_links,
    check_tree,
    is_regular_file,
    open_fd,
    open_file,
    read_text,
    refuse_link,
    remove_entry,
)

__all__ = [
    "FORMAT",
    "MANIFEST",
    "NO_VERIFY_HINT",
    "OLD_PREFIX",
    "TMP_PREFIX",
    "TOKENIZER_FILES",
    "ManifestError",
    "SymlinkRefusedError",
    "atomic_dir",
    "atomic_output",
    "atomic_write",
    "atomic_write_text",
    "check_no_links",
    "check_tree",
    "file_entry",
    "is_regular_file",
    "looks_local",
    "open_fd",
    "open_file",
    "read_text",
    "refuse_link",
    "remove_entry",
    "remove_stale_temporaries",
    "require_local_or_hub",
    "sha256_file",
    "update_manifest",
    "verify_manifest",
    "write_manifest",
    "write_manifest_entries",
]
