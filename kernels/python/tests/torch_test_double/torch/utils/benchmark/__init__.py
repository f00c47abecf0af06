"""TEST DOUBLE for torch.utils.benchmark (see torch/__init__.py)."""
import time


class Measurement:
    def __init__(self, number_per_run, raw_times, label, sub_label, description):
        self.number_per_run, self.raw_times = number_per_run, raw_times
        self.times = [t / number_per_run for t in raw_times]
        self.mean = sum(self.times) / len(self.times)
        self.median = sorted(self.times)[len(self.times) // 2]
        self.label, self.sub_label, self.description = label, sub_label, description


class Timer:
    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=time.perf_counter, globals=None,
                 label=None, sub_label=None, description=None, env=None, num_threads=1, language=None):
        self._namespace = dict(globals or {})
        exec(setup, self._namespace)
        self._code = compile(stmt, "<stmt>", "exec")
        self._timer = timer
        self.label, self.sub_label, self.description = label, sub_label, description

    def timeit(self, number=1000000):
        start = self._timer()
        for _ in range(number):
            exec(self._code, self._namespace)
        return Measurement(number, [self._timer() - start], self.label, self.sub_label, self.description)

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        return self.timeit(10)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0, callback=None):
        return self.timeit(10)


class Compare:
    def __init__(self, results):
        self.results = list(results)

    def print(self):
        for m in self.results:
            print(m.label, m.sub_label, m.description, "%.3g s" % m.median)
