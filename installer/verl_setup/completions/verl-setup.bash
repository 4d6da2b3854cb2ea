# verl-setup completion for bash, written from its parser by `make completion`.
_verl_setup() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} path="" word i opts=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    [[ $word == -* ]] && continue
    if [[ -z $path ]]; then path=$word
    elif [[ " matrix docker wheelhouse " == *" $path "* ]]; then path="$path $word"
    fi
  done
  case "$prev" in
    --engine) opts='vllm sglang none' ;;
    --backend) opts='fsdp megatron' ;;
    --policy) opts='compat strict forward' ;;
    --prefer) opts='whole order' ;;
    --gpu) opts='2060 T1000 A100 A30 A800 A40 A10 3090 3070 3060 A2 2050 3050 L40S 4090 4080 L4 4060 H100 H200 H800 H20 GH200 B200 GB200 B100 B300 GB300 5090 5080 5070 5060 5050' ;;
    --row) opts='verl0.9-vllm0.24.0 verl0.9-sglang0.5.12 verl0.9-vllm0.31.0 verl0.9-sglang0.5.14 verl0.9-vllm0.19.1-cu128 verl0.9-vllm0.24.0-aarch64 verl0.9-sglang0.5.12-aarch64 verl0.8-vllm0.20.2 verl0.9-vllm0.24.0-megatron verl0.8-vllm0.20.2-megatron verl0.8-sglang0.5.12 verl0.7-vllm0.17.0 verl0.7-vllm0.12.0 verl0.7-vllm0.12.0-cu129 verl0.7-sglang0.5.9 verl0.7-sglang0.5.6 verl0.6-vllm0.11.0 verl0.6-vllm0.10.0 verl0.6-sglang0.5.5 verl0.6-sglang0.5.2 verl0.5-vllm0.8.5 verl0.4-vllm0.8.5 verl0.4-sglang0.4.6.post5 cpu verl0.8-vllm-ascend0.18.0rc1 verl0.8-vllm-ascend0.18.0rc1-aarch64' ;;
    --builder) opts='auto buildx buildkit legacy' ;;
    --format) opts='requirements pylock' ;;
    --nvcc) opts='auto host pypi' ;;
    --check) opts='python pins cuda ray collective hf-cache gpu-memory memory fit engine-env launch accelerator' ;;
  esac
  if [[ -z $opts ]]; then
    case "$path" in
    '') opts='detect plan matrix render docker install lock bundle verify smoke wheelhouse doctor completion diagnose report -h --help -V --version' ;;
    detect) opts='-h --help --json --ray --slurm --out --force --prefix --python --runtime-env --installed --timeout -v --verbose -q --quiet --no-config' ;;
    plan) opts='-h --help --json --explain --all-rows --known-issues --cluster --launch --host --driver --gpu --sm --gpu-count --no-gpu --npu --cann --rocm --arch --glibc --python --verl --engine --backend --policy --prefer --row --matrix --build --build-flash-attn --wheel-source --without --with --with-requirements --with-editable --keep -v --verbose -q --quiet --no-config' ;;
    matrix) opts='list show validate prove check propose -h --help' ;;
    'matrix list') opts='-h --help --json --matrix -v --verbose -q --quiet --no-config' ;;
    'matrix show') opts='-h --help --json --matrix -v --verbose -q --quiet --no-config' ;;
    'matrix validate') opts='-h --help --json -v --verbose -q --quiet --no-config' ;;
    'matrix prove') opts='-h --help --matrix --json --no-record -v --verbose -q --quiet --no-config' ;;
    'matrix check') opts='-h --help --matrix --json --record -v --verbose -q --quiet --no-config' ;;
    'matrix propose') opts='-h --help --since --out --matrix --json -v --verbose -q --quiet --no-config' ;;
    render) opts='venv docker apptainer env ray slurm kuberay uv-project all -h --help --out --dry-run --force --json --cluster --base-image --buildkit --ca-bundle --container --hf-home --iface --image --job --nodes --head-ip --ray-port --dashboard-port --venv --namespace --build --build-flash-attn --wheel-source --without --with --with-requirements --with-editable --keep --host --driver --gpu --sm --gpu-count --no-gpu --npu --cann --rocm --arch --glibc --python --verl --engine --backend --policy --prefer --row --matrix -v --verbose -q --quiet --no-config' ;;
    docker) opts='build -h --help' ;;
    'docker build') opts='-h --help --tag --out --push --force --network --builder --print-context --json --base-image --buildkit --ca-bundle --container --hf-home --iface --image --job --nodes --head-ip --ray-port --dashboard-port --venv --namespace --build --build-flash-attn --wheel-source --without --with --with-requirements --with-editable --keep --host --driver --gpu --sm --gpu-count --no-gpu --npu --cann --rocm --arch --glibc --python --verl --engine --backend --policy --prefer --row --matrix -v --verbose -q --quiet --no-config' ;;
    install) opts='-h --help --prefix --lock --offline --dry-run --json --no-python-downloads --wait --no-import --upgrade --refresh --import-timeout --cluster --ray --ray-python --installed --timeout --build --build-flash-attn --wheel-source --without --with --with-requirements --with-editable --keep --host --driver --gpu --sm --gpu-count --no-gpu --npu --cann --rocm --arch --glibc --python --verl --engine --backend --policy --prefer --row --matrix -v --verbose -q --quiet --no-config' ;;
    lock) opts='-h --help --out --format --json --build --build-flash-attn --wheel-source --without --with --with-requirements --with-editable --keep --host --driver --gpu --sm --gpu-count --no-gpu --npu --cann --rocm --arch --glibc --python --verl --engine --backend --policy --prefer --row --matrix -v --verbose -q --quiet --no-config' ;;
    bundle) opts='-h --help --out --lock --no-python --wait --json --build --build-flash-attn --wheel-source --without --with --with-requirements --with-editable --keep --host --driver --gpu --sm --gpu-count --no-gpu --npu --cann --rocm --arch --glibc --python --verl --engine --backend --policy --prefer --row --matrix -v --verbose -q --quiet --no-config' ;;
    verify) opts='-h --help --prefix --python --lock --row --matrix --ray --timeout --no-import --import-timeout --json -v --verbose -q --quiet --no-config' ;;
    smoke) opts='-h --help --prefix --model --gpus --ray-cpus --storage-units --timeout --work --keep --json -v --verbose -q --quiet --no-config' ;;
    wheelhouse) opts='build list -h --help' ;;
    'wheelhouse build') opts='-h --help --out --only --source --arch-list --jobs --nvcc --keep-scratch --json --host --driver --gpu --sm --gpu-count --no-gpu --npu --cann --rocm --arch --glibc --python --verl --engine --backend --policy --prefer --row --matrix -v --verbose -q --quiet --no-config' ;;
    'wheelhouse list') opts='-h --help --verify --json -v --verbose -q --quiet --no-config' ;;
    doctor) opts='-h --help --json --check --prefix --ray-address --model-size --host --matrix --bucket-numel -v --verbose -q --quiet --no-config' ;;
    completion) opts='bash zsh fish -h --help -v --verbose -q --quiet --no-config' ;;
    diagnose) opts='-h --help --json --dmesg --no-system -v --verbose -q --quiet --no-config' ;;
    report) opts='-h --help --prefix --log --check --imports --mask-home --host --driver --gpu --sm --gpu-count --no-gpu --npu --cann --rocm --arch --glibc --python --verl --engine --backend --policy --prefer --row --matrix -v --verbose -q --quiet --no-config' ;;
    esac
  fi
  mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
}
complete -o default -F _verl_setup verl-setup
