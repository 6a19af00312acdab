# accelbench: how fast is this accelerator, really?
#   snakemake --cores 4                      # the default CPU run (config.yaml)
#   snakemake --cores 4 --configfile my.yaml # another config
# Stages (accelbench.registry.STAGES): run-info -> detect -> the device stages (registry.PLUGINS, one job per
#   backend, in order) -> aggregate -> plots -> report

from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "workflow/rules/common.smk"


wildcard_constraints:
    backend="|".join(backends.NAMES),


include: "workflow/rules/containers.smk"
include: "workflow/rules/detect.smk"
include: "workflow/rules/devices.smk"
include: "workflow/rules/compare.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/fleet.smk"


rule all:
    default_target: True
    input:
        REPORT_HTML,
