"""joulehouse benchmarks (`make bench`): every figure printed next to a baseline measured in the
same run on the same data, as a ratio. Benchmarks are not tests: nothing here asserts a time."""
