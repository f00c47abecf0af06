"""TEST DOUBLE of tritonbench.utils.parser: the options BenchmarkOperator reads."""
import argparse


def get_parser(args=None):
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--op", type=str, required=False)
    parser.add_argument("--mode", choices=["fwd", "bwd", "fwd_bwd", "fwd_no_grad"], default="fwd")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", default="bypass")
    parser.add_argument("--metrics", default=None)
    parser.add_argument("--only", default=None)
    parser.add_argument("--skip", default=None)
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--input-id", type=int, default=0)
    parser.add_argument("--num-inputs", type=int, default=None)
    parser.add_argument("--cudagraph", action="store_true")
    return parser
