"""TEST DOUBLE for PyTorch: only torch.utils.benchmark's Timer, Compare and
Measurement, with the same arguments as PyTorch 2's, timed on the host
clock; for kwbench's tests of Timer scripts without PyTorch or a GPU."""
