"""What the fork server preloads: a step forked from it imports nothing more to run (each
import a forked step pays again costs it milliseconds: docs/performance.md, the executor)."""
import json
import subprocess
import sys
import textwrap


def test_a_step_run_after_preload_imports_nothing_more(tmp_path):
    (tmp_path / "noop_steps.py").write_text(textwrap.dedent('''
        from pathlib import Path
        from mlpipe import Input, Output, component

        @component
        def noop(src: Input["uri_file"], out: Output["uri_file"]):
            Path(out).write_text(Path(src).read_text())
    '''))
    (tmp_path / "seed.txt").write_text("x")
    probe = textwrap.dedent(f'''
        import json, os, sys, threading
        sys.path.insert(0, {str(tmp_path)!r})
        from mlpipe.runtime import step
        import noop_steps
        step.preload()
        assert threading.active_count() == 1, "preload started a thread"
        before = set(sys.modules)
        code = step.execute({{"function": "noop_steps:noop", "sys_path": [],
                              "inputs": {{"src": {str(tmp_path / "seed.txt")!r}}},
                              "outputs": {{"out": {str(tmp_path / "out.txt")!r}}},
                              "params": {{}}, "record": {str(tmp_path / "record")!r}}})
        print(json.dumps([code, sorted(set(sys.modules) - before)]))
    ''')
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True, check=True)
    code, imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0, done.stderr
    # a module named here is imported by every forked step: add it to step.preload()
    assert imported == []
    assert (tmp_path / "out.txt").read_text() == "x"
    assert json.loads((tmp_path / "record" / "step.json").read_text())["status"] == "succeeded"
