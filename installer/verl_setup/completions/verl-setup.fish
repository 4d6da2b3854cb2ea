# verl-setup completion for fish, written from its parser by `make completion`.
complete -c verl-setup -f
complete -c verl-setup -n __fish_use_subcommand -a 'detect plan matrix render docker install lock bundle verify smoke wheelhouse doctor completion diagnose report'
complete -c verl-setup -n '__fish_seen_subcommand_from matrix; and not __fish_seen_subcommand_from list show validate prove check propose' -a 'list show validate prove check propose'
complete -c verl-setup -n '__fish_seen_subcommand_from docker; and not __fish_seen_subcommand_from build' -a build
complete -c verl-setup -n '__fish_seen_subcommand_from wheelhouse; and not __fish_seen_subcommand_from build list' -a 'build list'
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l ray
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l slurm
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l out
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l force
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l prefix
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l python
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l runtime-env
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l installed
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l timeout
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from detect' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l explain
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l all-rows
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l known-issues
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l cluster
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l launch
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l host
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l driver
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l gpu -x -a '2060 T1000 A100 A30 A800 A40 A10 3090 3070 3060 A2 2050 3050 L40S 4090 4080 L4 4060 H100 H200 H800 H20 GH200 B200 GB200 B100 B300 GB300 5090 5080 5070 5060 5050'
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l sm
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l gpu-count
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l no-gpu
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l npu
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l cann
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l rocm
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l arch
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l glibc
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l python
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l verl
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l engine -x -a 'vllm sglang none'
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l backend -x -a 'fsdp megatron'
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l policy -x -a 'compat strict forward'
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l prefer -x -a 'whole order'
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l row -x -a 'verl0.9-vllm0.24.0 verl0.9-sglang0.5.12 verl0.9-vllm0.31.0 verl0.9-sglang0.5.14 verl0.9-vllm0.19.1-cu128 verl0.9-vllm0.24.0-aarch64 verl0.9-sglang0.5.12-aarch64 verl0.8-vllm0.20.2 verl0.9-vllm0.24.0-megatron verl0.8-vllm0.20.2-megatron verl0.8-sglang0.5.12 verl0.7-vllm0.17.0 verl0.7-vllm0.12.0 verl0.7-vllm0.12.0-cu129 verl0.7-sglang0.5.9 verl0.7-sglang0.5.6 verl0.6-vllm0.11.0 verl0.6-vllm0.10.0 verl0.6-sglang0.5.5 verl0.6-sglang0.5.2 verl0.5-vllm0.8.5 verl0.4-vllm0.8.5 verl0.4-sglang0.4.6.post5 cpu verl0.8-vllm-ascend0.18.0rc1 verl0.8-vllm-ascend0.18.0rc1-aarch64'
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l build
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l build-flash-attn
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l wheel-source
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l without
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l with
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l with-requirements
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l with-editable
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l keep
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from plan' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from list' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from list' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from list' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from list' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from list' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from list' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from list' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from list' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from list' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from show' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from show' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from show' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from show' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from show' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from show' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from show' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from show' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from show' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from validate' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from validate' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from validate' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from validate' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from validate' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from validate' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from validate' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from validate' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from prove' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from prove' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from prove' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from prove' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from prove' -l no-record
complete -c verl-setup -n '__fish_seen_subcommand_from prove' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from prove' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from prove' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from prove' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from prove' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from check' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from check' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from check' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from check' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from check' -l record
complete -c verl-setup -n '__fish_seen_subcommand_from check' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from check' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from check' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from check' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from check' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from propose' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from propose' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from propose' -l since
complete -c verl-setup -n '__fish_seen_subcommand_from propose' -l out
complete -c verl-setup -n '__fish_seen_subcommand_from propose' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from propose' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from propose' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from propose' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from propose' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from propose' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from propose' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from render' -a 'venv docker apptainer env ray slurm kuberay uv-project all'
complete -c verl-setup -n '__fish_seen_subcommand_from render' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l out
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l dry-run
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l force
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l cluster
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l base-image
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l buildkit
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l ca-bundle
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l container
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l hf-home
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l iface
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l image
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l job
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l nodes
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l head-ip
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l ray-port
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l dashboard-port
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l venv
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l namespace
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l build
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l build-flash-attn
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l wheel-source
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l without
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l with
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l with-requirements
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l with-editable
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l keep
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l host
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l driver
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l gpu -x -a '2060 T1000 A100 A30 A800 A40 A10 3090 3070 3060 A2 2050 3050 L40S 4090 4080 L4 4060 H100 H200 H800 H20 GH200 B200 GB200 B100 B300 GB300 5090 5080 5070 5060 5050'
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l sm
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l gpu-count
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l no-gpu
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l npu
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l cann
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l rocm
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l arch
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l glibc
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l python
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l verl
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l engine -x -a 'vllm sglang none'
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l backend -x -a 'fsdp megatron'
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l policy -x -a 'compat strict forward'
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l prefer -x -a 'whole order'
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l row -x -a 'verl0.9-vllm0.24.0 verl0.9-sglang0.5.12 verl0.9-vllm0.31.0 verl0.9-sglang0.5.14 verl0.9-vllm0.19.1-cu128 verl0.9-vllm0.24.0-aarch64 verl0.9-sglang0.5.12-aarch64 verl0.8-vllm0.20.2 verl0.9-vllm0.24.0-megatron verl0.8-vllm0.20.2-megatron verl0.8-sglang0.5.12 verl0.7-vllm0.17.0 verl0.7-vllm0.12.0 verl0.7-vllm0.12.0-cu129 verl0.7-sglang0.5.9 verl0.7-sglang0.5.6 verl0.6-vllm0.11.0 verl0.6-vllm0.10.0 verl0.6-sglang0.5.5 verl0.6-sglang0.5.2 verl0.5-vllm0.8.5 verl0.4-vllm0.8.5 verl0.4-sglang0.4.6.post5 cpu verl0.8-vllm-ascend0.18.0rc1 verl0.8-vllm-ascend0.18.0rc1-aarch64'
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from render' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from render' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from render' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from build' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l tag
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l out
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l push
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l force
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l network
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l builder -x -a 'auto buildx buildkit legacy'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l print-context
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l base-image
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l buildkit
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l ca-bundle
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l container
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l hf-home
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l iface
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l image
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l job
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l nodes
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l head-ip
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l ray-port
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l dashboard-port
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l venv
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l namespace
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l build
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l build-flash-attn
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l wheel-source
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l without
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l with
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l with-requirements
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l with-editable
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l keep
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l host
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l driver
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l gpu -x -a '2060 T1000 A100 A30 A800 A40 A10 3090 3070 3060 A2 2050 3050 L40S 4090 4080 L4 4060 H100 H200 H800 H20 GH200 B200 GB200 B100 B300 GB300 5090 5080 5070 5060 5050'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l sm
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l gpu-count
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l no-gpu
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l npu
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l cann
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l rocm
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l arch
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l glibc
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l python
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l verl
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l engine -x -a 'vllm sglang none'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l backend -x -a 'fsdp megatron'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l policy -x -a 'compat strict forward'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l prefer -x -a 'whole order'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l row -x -a 'verl0.9-vllm0.24.0 verl0.9-sglang0.5.12 verl0.9-vllm0.31.0 verl0.9-sglang0.5.14 verl0.9-vllm0.19.1-cu128 verl0.9-vllm0.24.0-aarch64 verl0.9-sglang0.5.12-aarch64 verl0.8-vllm0.20.2 verl0.9-vllm0.24.0-megatron verl0.8-vllm0.20.2-megatron verl0.8-sglang0.5.12 verl0.7-vllm0.17.0 verl0.7-vllm0.12.0 verl0.7-vllm0.12.0-cu129 verl0.7-sglang0.5.9 verl0.7-sglang0.5.6 verl0.6-vllm0.11.0 verl0.6-vllm0.10.0 verl0.6-sglang0.5.5 verl0.6-sglang0.5.2 verl0.5-vllm0.8.5 verl0.4-vllm0.8.5 verl0.4-sglang0.4.6.post5 cpu verl0.8-vllm-ascend0.18.0rc1 verl0.8-vllm-ascend0.18.0rc1-aarch64'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from build' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from build' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from install' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l prefix
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l lock
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l offline
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l dry-run
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l no-python-downloads
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l wait
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l no-import
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l upgrade
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l refresh
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l import-timeout
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l cluster
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l ray
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l ray-python
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l installed
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l timeout
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l build
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l build-flash-attn
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l wheel-source
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l without
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l with
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l with-requirements
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l with-editable
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l keep
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l host
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l driver
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l gpu -x -a '2060 T1000 A100 A30 A800 A40 A10 3090 3070 3060 A2 2050 3050 L40S 4090 4080 L4 4060 H100 H200 H800 H20 GH200 B200 GB200 B100 B300 GB300 5090 5080 5070 5060 5050'
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l sm
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l gpu-count
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l no-gpu
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l npu
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l cann
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l rocm
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l arch
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l glibc
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l python
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l verl
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l engine -x -a 'vllm sglang none'
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l backend -x -a 'fsdp megatron'
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l policy -x -a 'compat strict forward'
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l prefer -x -a 'whole order'
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l row -x -a 'verl0.9-vllm0.24.0 verl0.9-sglang0.5.12 verl0.9-vllm0.31.0 verl0.9-sglang0.5.14 verl0.9-vllm0.19.1-cu128 verl0.9-vllm0.24.0-aarch64 verl0.9-sglang0.5.12-aarch64 verl0.8-vllm0.20.2 verl0.9-vllm0.24.0-megatron verl0.8-vllm0.20.2-megatron verl0.8-sglang0.5.12 verl0.7-vllm0.17.0 verl0.7-vllm0.12.0 verl0.7-vllm0.12.0-cu129 verl0.7-sglang0.5.9 verl0.7-sglang0.5.6 verl0.6-vllm0.11.0 verl0.6-vllm0.10.0 verl0.6-sglang0.5.5 verl0.6-sglang0.5.2 verl0.5-vllm0.8.5 verl0.4-vllm0.8.5 verl0.4-sglang0.4.6.post5 cpu verl0.8-vllm-ascend0.18.0rc1 verl0.8-vllm-ascend0.18.0rc1-aarch64'
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from install' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from install' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from install' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l out
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l format -x -a 'requirements pylock'
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l build
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l build-flash-attn
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l wheel-source
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l without
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l with
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l with-requirements
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l with-editable
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l keep
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l host
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l driver
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l gpu -x -a '2060 T1000 A100 A30 A800 A40 A10 3090 3070 3060 A2 2050 3050 L40S 4090 4080 L4 4060 H100 H200 H800 H20 GH200 B200 GB200 B100 B300 GB300 5090 5080 5070 5060 5050'
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l sm
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l gpu-count
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l no-gpu
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l npu
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l cann
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l rocm
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l arch
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l glibc
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l python
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l verl
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l engine -x -a 'vllm sglang none'
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l backend -x -a 'fsdp megatron'
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l policy -x -a 'compat strict forward'
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l prefer -x -a 'whole order'
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l row -x -a 'verl0.9-vllm0.24.0 verl0.9-sglang0.5.12 verl0.9-vllm0.31.0 verl0.9-sglang0.5.14 verl0.9-vllm0.19.1-cu128 verl0.9-vllm0.24.0-aarch64 verl0.9-sglang0.5.12-aarch64 verl0.8-vllm0.20.2 verl0.9-vllm0.24.0-megatron verl0.8-vllm0.20.2-megatron verl0.8-sglang0.5.12 verl0.7-vllm0.17.0 verl0.7-vllm0.12.0 verl0.7-vllm0.12.0-cu129 verl0.7-sglang0.5.9 verl0.7-sglang0.5.6 verl0.6-vllm0.11.0 verl0.6-vllm0.10.0 verl0.6-sglang0.5.5 verl0.6-sglang0.5.2 verl0.5-vllm0.8.5 verl0.4-vllm0.8.5 verl0.4-sglang0.4.6.post5 cpu verl0.8-vllm-ascend0.18.0rc1 verl0.8-vllm-ascend0.18.0rc1-aarch64'
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from lock' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l out
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l lock
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l no-python
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l wait
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l build
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l build-flash-attn
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l wheel-source
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l without
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l with
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l with-requirements
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l with-editable
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l keep
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l host
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l driver
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l gpu -x -a '2060 T1000 A100 A30 A800 A40 A10 3090 3070 3060 A2 2050 3050 L40S 4090 4080 L4 4060 H100 H200 H800 H20 GH200 B200 GB200 B100 B300 GB300 5090 5080 5070 5060 5050'
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l sm
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l gpu-count
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l no-gpu
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l npu
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l cann
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l rocm
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l arch
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l glibc
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l python
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l verl
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l engine -x -a 'vllm sglang none'
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l backend -x -a 'fsdp megatron'
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l policy -x -a 'compat strict forward'
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l prefer -x -a 'whole order'
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l row -x -a 'verl0.9-vllm0.24.0 verl0.9-sglang0.5.12 verl0.9-vllm0.31.0 verl0.9-sglang0.5.14 verl0.9-vllm0.19.1-cu128 verl0.9-vllm0.24.0-aarch64 verl0.9-sglang0.5.12-aarch64 verl0.8-vllm0.20.2 verl0.9-vllm0.24.0-megatron verl0.8-vllm0.20.2-megatron verl0.8-sglang0.5.12 verl0.7-vllm0.17.0 verl0.7-vllm0.12.0 verl0.7-vllm0.12.0-cu129 verl0.7-sglang0.5.9 verl0.7-sglang0.5.6 verl0.6-vllm0.11.0 verl0.6-vllm0.10.0 verl0.6-sglang0.5.5 verl0.6-sglang0.5.2 verl0.5-vllm0.8.5 verl0.4-vllm0.8.5 verl0.4-sglang0.4.6.post5 cpu verl0.8-vllm-ascend0.18.0rc1 verl0.8-vllm-ascend0.18.0rc1-aarch64'
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from bundle' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l prefix
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l python
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l lock
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l row -x -a 'verl0.9-vllm0.24.0 verl0.9-sglang0.5.12 verl0.9-vllm0.31.0 verl0.9-sglang0.5.14 verl0.9-vllm0.19.1-cu128 verl0.9-vllm0.24.0-aarch64 verl0.9-sglang0.5.12-aarch64 verl0.8-vllm0.20.2 verl0.9-vllm0.24.0-megatron verl0.8-vllm0.20.2-megatron verl0.8-sglang0.5.12 verl0.7-vllm0.17.0 verl0.7-vllm0.12.0 verl0.7-vllm0.12.0-cu129 verl0.7-sglang0.5.9 verl0.7-sglang0.5.6 verl0.6-vllm0.11.0 verl0.6-vllm0.10.0 verl0.6-sglang0.5.5 verl0.6-sglang0.5.2 verl0.5-vllm0.8.5 verl0.4-vllm0.8.5 verl0.4-sglang0.4.6.post5 cpu verl0.8-vllm-ascend0.18.0rc1 verl0.8-vllm-ascend0.18.0rc1-aarch64'
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l ray
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l timeout
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l no-import
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l import-timeout
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from verify' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -l prefix
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -l model
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -l gpus
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -l ray-cpus
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -l storage-units
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -l timeout
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -l work
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -l keep
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from smoke' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from build' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l out
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l only
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l source
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l arch-list
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l jobs
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l nvcc -x -a 'auto host pypi'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l keep-scratch
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l host
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l driver
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l gpu -x -a '2060 T1000 A100 A30 A800 A40 A10 3090 3070 3060 A2 2050 3050 L40S 4090 4080 L4 4060 H100 H200 H800 H20 GH200 B200 GB200 B100 B300 GB300 5090 5080 5070 5060 5050'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l sm
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l gpu-count
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l no-gpu
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l npu
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l cann
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l rocm
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l arch
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l glibc
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l python
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l verl
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l engine -x -a 'vllm sglang none'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l backend -x -a 'fsdp megatron'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l policy -x -a 'compat strict forward'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l prefer -x -a 'whole order'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l row -x -a 'verl0.9-vllm0.24.0 verl0.9-sglang0.5.12 verl0.9-vllm0.31.0 verl0.9-sglang0.5.14 verl0.9-vllm0.19.1-cu128 verl0.9-vllm0.24.0-aarch64 verl0.9-sglang0.5.12-aarch64 verl0.8-vllm0.20.2 verl0.9-vllm0.24.0-megatron verl0.8-vllm0.20.2-megatron verl0.8-sglang0.5.12 verl0.7-vllm0.17.0 verl0.7-vllm0.12.0 verl0.7-vllm0.12.0-cu129 verl0.7-sglang0.5.9 verl0.7-sglang0.5.6 verl0.6-vllm0.11.0 verl0.6-vllm0.10.0 verl0.6-sglang0.5.5 verl0.6-sglang0.5.2 verl0.5-vllm0.8.5 verl0.4-vllm0.8.5 verl0.4-sglang0.4.6.post5 cpu verl0.8-vllm-ascend0.18.0rc1 verl0.8-vllm-ascend0.18.0rc1-aarch64'
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from build' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from build' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from build' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from list' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from list' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from list' -l verify
complete -c verl-setup -n '__fish_seen_subcommand_from list' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from list' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from list' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from list' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from list' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from list' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -l check -x -a 'python pins cuda ray collective hf-cache gpu-memory memory fit engine-env launch accelerator'
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -l prefix
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -l ray-address
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -l model-size
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -l host
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -l bucket-numel
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from doctor' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'
complete -c verl-setup -n '__fish_seen_subcommand_from completion' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from completion' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from completion' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from completion' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from completion' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from completion' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from completion' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from diagnose' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from diagnose' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from diagnose' -l json
complete -c verl-setup -n '__fish_seen_subcommand_from diagnose' -l dmesg
complete -c verl-setup -n '__fish_seen_subcommand_from diagnose' -l no-system
complete -c verl-setup -n '__fish_seen_subcommand_from diagnose' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from diagnose' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from diagnose' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from diagnose' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from diagnose' -l no-config
complete -c verl-setup -n '__fish_seen_subcommand_from report' -s h
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l help
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l prefix
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l log
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l check -x -a 'python pins cuda ray collective hf-cache gpu-memory memory fit engine-env launch accelerator'
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l imports
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l mask-home
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l host
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l driver
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l gpu -x -a '2060 T1000 A100 A30 A800 A40 A10 3090 3070 3060 A2 2050 3050 L40S 4090 4080 L4 4060 H100 H200 H800 H20 GH200 B200 GB200 B100 B300 GB300 5090 5080 5070 5060 5050'
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l sm
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l gpu-count
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l no-gpu
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l npu
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l cann
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l rocm
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l arch
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l glibc
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l python
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l verl
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l engine -x -a 'vllm sglang none'
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l backend -x -a 'fsdp megatron'
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l policy -x -a 'compat strict forward'
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l prefer -x -a 'whole order'
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l row -x -a 'verl0.9-vllm0.24.0 verl0.9-sglang0.5.12 verl0.9-vllm0.31.0 verl0.9-sglang0.5.14 verl0.9-vllm0.19.1-cu128 verl0.9-vllm0.24.0-aarch64 verl0.9-sglang0.5.12-aarch64 verl0.8-vllm0.20.2 verl0.9-vllm0.24.0-megatron verl0.8-vllm0.20.2-megatron verl0.8-sglang0.5.12 verl0.7-vllm0.17.0 verl0.7-vllm0.12.0 verl0.7-vllm0.12.0-cu129 verl0.7-sglang0.5.9 verl0.7-sglang0.5.6 verl0.6-vllm0.11.0 verl0.6-vllm0.10.0 verl0.6-sglang0.5.5 verl0.6-sglang0.5.2 verl0.5-vllm0.8.5 verl0.4-vllm0.8.5 verl0.4-sglang0.4.6.post5 cpu verl0.8-vllm-ascend0.18.0rc1 verl0.8-vllm-ascend0.18.0rc1-aarch64'
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l matrix
complete -c verl-setup -n '__fish_seen_subcommand_from report' -s v
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l verbose
complete -c verl-setup -n '__fish_seen_subcommand_from report' -s q
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l quiet
complete -c verl-setup -n '__fish_seen_subcommand_from report' -l no-config
