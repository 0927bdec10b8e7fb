from gpuadvisor.cli.app import make_app

app = make_app(
    "advisor",
    help="Recommend the cheapest GPU cluster on GCP or AWS that trains a model by a deadline "
    "(or the fastest within a budget), from measurements and fitted performance models.",
)
