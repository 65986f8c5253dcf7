"""qrlib.rl.release: a traceback a library keeps as a module global must stop pinning the
frames (and the objects in them) it was raised under."""
import gc
import sys
import types
import weakref

from qrlib.rl.release import drop_stored_tracebacks, release_memory


class Big:
    """Stands in for a trainer held by a frame's locals."""


def _lazy_import_inside(holder: Big, module: types.ModuleType) -> None:
    # what vllm.multimodal.media.audio does on first import: keep the ImportError
    try:
        raise ImportError("No module named 'torchcodec'")
    except ImportError as exc:
        module._import_exc = exc


def _train(module: types.ModuleType) -> weakref.ref:
    trainer = Big()
    _lazy_import_inside(trainer, module)
    return weakref.ref(trainer)


def _fake_module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module
    return module


def test_stored_traceback_pins_the_frame_until_dropped():
    module = _fake_module("vllm_qrlib_test_pin")
    try:
        ref = _train(module)
        gc.collect()
        assert ref() is not None, "the stored traceback should keep the trainer alive"
        assert drop_stored_tracebacks(("vllm_qrlib_test_pin",)) == 1
        gc.collect()
        assert ref() is None
        assert isinstance(module._import_exc, ImportError)  # the exception itself stays
        assert module._import_exc.__traceback__ is None
    finally:
        del sys.modules["vllm_qrlib_test_pin"]


def test_other_prefixes_and_chained_exceptions():
    other = _fake_module("notvllm_qrlib_test")
    chained = _fake_module("vllm_qrlib_test_chain")
    try:
        _train(other)
        try:
            try:
                raise KeyError("inner")
            except KeyError as inner:
                raise RuntimeError("outer") from inner
        except RuntimeError as exc:
            chained._exc = exc
        assert drop_stored_tracebacks(("vllm_qrlib_test_chain",)) == 2  # outer and its cause
        assert chained._exc.__cause__.__traceback__ is None
        assert other._import_exc.__traceback__ is not None  # not under the prefix: untouched
    finally:
        del sys.modules["notvllm_qrlib_test"], sys.modules["vllm_qrlib_test_chain"]


def test_release_memory_reports():
    out = release_memory(prefixes=("vllm_qrlib_test_none",))
    assert out["tracebacks_cleared"] == 0 and out["compile_hooks_dropped"] == 0
    assert out["rss_after_gib"] > 0 and set(out) == {"rss_before_gib", "rss_after_gib",
                                                     "tracebacks_cleared",
                                                     "compile_hooks_dropped", "malloc_trim",
                                                     "cuda_cache_freed"}
    assert out["cuda_cache_freed"] is False  # no GPU here: nothing to hand back


def test_compile_hook_of_a_closed_engine_is_dropped_and_frees_its_model():
    """vLLM's compile wrapper registers a bound bytecode hook with dynamo and never removes
    it; the hook pins the engine's model until drop_compile_hooks removes it."""
    import torch._dynamo.convert_frame as cf

    from qrlib.rl.release import drop_compile_hooks

    module = _fake_module("vllm_qrlib_test_hook")

    class Wrapper:  # stands in for vllm.compilation.wrapper.TorchCompileWithNoGuardsWrapper
        def __init__(self) -> None:
            self.model = Big()

        def bytecode_hook(self, old, new):
            return None

    Wrapper.__module__ = module.__name__
    w = Wrapper()
    ref = weakref.ref(w.model)
    handle = cf.register_bytecode_hook(w.bytecode_hook)
    other = cf.register_bytecode_hook(lambda old, new: None)  # not vLLM's: kept
    try:
        del w
        gc.collect()
        assert ref() is not None, "the registered hook should keep the model alive"
        assert drop_compile_hooks(("vllm_qrlib_test_hook",)) == 1
        gc.collect()
        assert ref() is None
        assert other.id in cf._bytecode_hooks
        assert drop_compile_hooks(("vllm_qrlib_test_hook",)) == 0
    finally:
        handle.remove()
        other.remove()
        sys.modules.pop(module.__name__, None)
