"""`utils.import_hooks`: a callback right after a module's first import, and the import-in-progress check."""

import sys

import pytest

from sbert_keras.utils import import_hooks


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [name for name in sys.modules if name.startswith("hooked_")]:
        del sys.modules[name]


def test_callback_runs_once_after_the_module_has_run(module_dir):
    (module_dir / "hooked_a.py").write_text("import time\nVALUE = 1\n")
    seen = []
    import_hooks.call_after_import("hooked_a", lambda: seen.append(sys.modules["hooked_a"].VALUE))
    assert seen == []
    import hooked_a

    del sys.modules["hooked_a"]
    import hooked_a  # noqa: F811 (a second import: no second call)

    assert seen == [1] and hooked_a.VALUE == 1
    assert not any(isinstance(finder, import_hooks._AfterImportFinder) for finder in sys.meta_path)


def test_an_imported_module_calls_at_once(module_dir):
    seen = []
    import_hooks.call_after_import("sys", lambda: seen.append("now"))
    assert seen == ["now"]


def test_a_failing_callback_warns_and_the_import_succeeds(module_dir):
    (module_dir / "hooked_b.py").write_text("VALUE = 2\n")

    def fail():
        raise RuntimeError("boom")

    import_hooks.call_after_import("hooked_b", fail)
    with pytest.warns(UserWarning, match="after importing hooked_b: RuntimeError: boom"):
        import hooked_b
    assert hooked_b.VALUE == 2 and hooked_b.__loader__ is hooked_b.__spec__.loader
    assert not isinstance(hooked_b.__loader__, import_hooks._CallbackLoader)


def test_importing_sees_a_module_under_way(module_dir):
    (module_dir / "hooked_pkg").mkdir()
    (module_dir / "hooked_pkg" / "__init__.py").write_text(
        "from sbert_keras.utils import import_hooks\n"
        "SELF = import_hooks.importing('hooked_pkg')\n"
        "SUBMODULES = import_hooks.importing('hooked_pkg', submodules_only=True)\n"
        "from hooked_pkg import inner\n"
    )
    (module_dir / "hooked_pkg" / "inner.py").write_text(
        "from sbert_keras.utils import import_hooks\nSUBMODULES = import_hooks.importing('hooked_pkg', True)\n"
    )
    import hooked_pkg

    assert hooked_pkg.SELF and not hooked_pkg.SUBMODULES and hooked_pkg.inner.SUBMODULES
    assert not import_hooks.importing("hooked_pkg")


def test_import_inside_wraps_the_first_import_only_when_asked(module_dir):
    import contextlib

    (module_dir / "hooked_c.py").write_text("import sys\nINSIDE = sys.modules['_around_flag'].value\n")
    (module_dir / "hooked_d.py").write_text("import sys\nINSIDE = sys.modules['_around_flag'].value\n")
    flag = type(sys)("_around_flag")
    flag.value = False
    sys.modules["_around_flag"] = flag

    @contextlib.contextmanager
    def around():
        flag.value = True
        yield
        flag.value = False

    try:
        import_hooks.import_inside("hooked_c", around, lambda: True)
        import_hooks.import_inside("hooked_d", around, lambda: False)
        import hooked_c
        import hooked_d
    finally:
        del sys.modules["_around_flag"]
    assert hooked_c.INSIDE and not hooked_d.INSIDE and not flag.value
    assert not any(isinstance(finder, import_hooks._AroundImportFinder) for finder in sys.meta_path)
