"""The lab: offline work on models, never imported by the runtime (engine, server, service).

corpus (what the builtin model reads), tokenizer_build, recipe (TrainConfig), sampler (training
rows), checkpoint (model dirs), train (objectives and loop), evaluate (eval-infill), sandbox (where
generated code runs), bench (decode/cache speed and agreement).
"""
