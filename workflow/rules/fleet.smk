# The fleet check (docs/fleet.md), a target of its own, not part of `all`:
#   snakemake fleet --cores 1 --config 'fleet={partition: gpu}'
# From the submitting host (a local rule: it calls sbatch and waits) it runs `accelbench fleet --submit`: one SLURM
# job per node of fleet.partition (or fleet.nodes), all at once, then each node's verdict into
# results/fleet-<run>/fleet.csv. A flagged node (exit 1) is the check's result, not the rule's failure; bad input
# (exit 2) fails it.
FLEET_DIR = f"{RESULTS}/fleet-{RUN}"


rule fleet:
    output:
        directory(FLEET_DIR),
    log:
        f"{RESULTS}/{registry.log_file('fleet')}",
    localrule: True
    params:
        config_json=json.dumps(run_config(config), sort_keys=True),
    shell:
        "accelbench fleet {output:q} --submit --config-json {params.config_json:q} > {log:q} 2>&1"
        " || [ $? -eq 1 ]"
