# accelbench: how fast is this accelerator, really?
#   snakemake --cores 4                      # the default CPU run (config.yaml)
#   snakemake --cores 4 --configfile my.yaml # another config
# Stages: run-info -> detect -> warmup -> matmul / transfer / amp -> aggregate -> plots -> report

from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "workflow/rules/common.smk"


wildcard_constraints:
    backend="cpu|cuda|rocm|mps|xla",


include: "workflow/rules/containers.smk"
include: "workflow/rules/detect.smk"
include: "workflow/rules/benchmarks.smk"
include: "workflow/rules/amp.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        REPORT_HTML,
    default_target: True
