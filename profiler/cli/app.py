from gpuadvisor.cli.app import make_app

app = make_app(
    "profiler",
    help="Measure distributed PyTorch training on local processes, GCP or EC2, and keep "
    "every measurement in a store.",
)
