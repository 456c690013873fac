"""Run a function right after another library is first imported.

`import sbert_keras` imports no TensorFlow (the CLI sets up a clean
console first, `utils.console`), yet `keras.saving.load_model` must find
sbert_keras' registered classes whether `keras` or `sbert_keras` is
imported first, as it finds KerasHub's after `import keras_hub`. So the
package asks `call_after_import("keras", ...)` to import its modules, and
with them every `register_keras_serializable` class, the moment Keras
itself has been imported.

Written by hand because the standard library has no post-import hook (PEP
369 was withdrawn): `install` puts a finder first on `sys.meta_path` that
answers only for the watched module, lets the regular finders find it, and
wraps its loader so that the callback runs once the module's code has run.

Example:
```python
from sbert_keras.utils import import_hooks
import_hooks.call_after_import("keras", lambda: print("keras is imported"))
```
"""

import contextlib
import importlib.abc
import importlib.util
import sys
import warnings


class _CallbackLoader(importlib.abc.Loader):
    """Runs the wrapped loader inside `around()`, then the callback; everything else is the wrapped loader's."""

    def __init__(self, loader, callback, around=contextlib.nullcontext):
        self._loader = loader
        self._callback = callback
        self._around = around

    def create_module(self, spec):
        with self._around():  # an extension module's shared library loads here
            return self._loader.create_module(spec)

    def exec_module(self, module):
        with self._around():
            self._loader.exec_module(module)
        module.__loader__ = module.__spec__.loader = self._loader
        try:
            self._callback()
        except Exception as error:  # the watched import itself succeeded: it must not fail
            warnings.warn(f"after importing {module.__name__}: {type(error).__name__}: {error}", stacklevel=2)

    def __getattr__(self, name):  # get_resource_reader, get_source, ... of the real loader
        return getattr(self._loader, name)


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of `name` when the other finders find it."""

    def __init__(self, name, callback):
        self.name = name
        self.callback = callback

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # once, and not for the look-up just below
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _CallbackLoader(spec.loader, self.callback)
        return spec


class _AroundImportFinder(_AfterImportFinder):
    """Wraps the loader of `name` in `around` when `when()` is true at its first look-up."""

    def __init__(self, name, around, when):
        super().__init__(name, lambda: None)
        self.around, self.when = around, when

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        if not self.when():
            return None  # the regular finders answer
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _CallbackLoader(spec.loader, self.callback, self.around)
        return spec


def import_inside(name, around, when):
    """Runs the first import of the top-level module `name` inside `around()`, if `when()` is true then.

    Nothing happens if `name` is already imported, or if `when()` is false at
    its first import (that import is left as it is, once and for all).

    Args:
        name: str. A top-level module name, e.g. `"tensorflow"`.
        around: callable returning a context manager.
        when: callable returning a bool, asked at the first import.

    Example:
    ```python
    import_hooks.import_inside("tensorflow", console.startup_lines_held, lambda: True)
    ```
    """
    if name not in sys.modules:
        sys.meta_path.insert(0, _AroundImportFinder(name, around, when))


def call_after_import(name, callback):
    """Calls `callback()` once, right after the top-level module `name` is first imported.

    If `name` is already imported, calls it now.

    Args:
        name: str. A top-level module name, e.g. `"keras"`.
        callback: callable without arguments.
    """
    if name in sys.modules:
        callback()
        return
    sys.meta_path.insert(0, _AfterImportFinder(name, callback))


def importing(name, submodules_only=False):
    """Whether the module `name` or one of its submodules is being imported at this moment.

    A callback of `call_after_import` uses it to tell a first import of the
    watched module from inside another import still under way (a package
    whose modules are half-built and must not be imported again, or
    TensorFlow importing Keras) from one by a user.

    Args:
        name: str. A module name, e.g. `"tensorflow"`.
        submodules_only: bool. Look at `name.*` only, not at `name` itself
            (a package asking from its own `__init__`).
    """
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith(name + ".") or (module_name == name and not submodules_only):
            if getattr(getattr(module, "__spec__", None), "_initializing", False):
                return True
    return False
