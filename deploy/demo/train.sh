#!/bin/sh
# Gantry's demo job: fits y = w1*x1 + w2*x2 + b to the CSV at /inputs/data.csv (header
# x1,x2,y) by full-batch gradient descent on the mean squared error.
#   - each epoch prints a progress line for the worker (`##gantry {json}`) and a log line;
#   - each epoch's weights go to /checkpoints/state, and a resumed job (a second node,
#     after the first was lost) starts from there;
#   - the model ends in /outputs/model.json, the job's result.
set -eu
DATA=/inputs/data.csv
STATE=/checkpoints/state
EPOCHS=${EPOCHS:-30}
RATE=${LEARNING_RATE:-0.3}
PAUSE=${EPOCH_PAUSE:-0.3}

# Mean squared error of the weights $1 $2 $3 and their next step: "w1 w2 b loss".
step() {
    awk -F, -v w1="$1" -v w2="$2" -v b="$3" -v rate="$RATE" '
        NR > 1 { e = w1 * $1 + w2 * $2 + b - $3; g1 += e * $1; g2 += e * $2; gb += e; se += e * e; n++ }
        END {
            if (n == 0) { print "no rows" > "/dev/stderr"; exit 1 }
            printf "%.8f %.8f %.8f %.8f\n", w1 - rate * 2 * g1 / n, w2 - rate * 2 * g2 / n, b - rate * 2 * gb / n, se / n
        }' "$DATA"
}

w1=0 w2=0 b=0 first=1
if [ -f "$STATE" ]; then
    read -r done w1 w2 b < "$STATE"
    first=$((done + 1))
    echo "resuming after epoch $done from the checkpoint"
fi
rows=$(($(wc -l < "$DATA") - 1))
echo "training a linear model on $rows rows, epochs $first to $EPOCHS"

epoch=$first
while [ "$epoch" -le "$EPOCHS" ]; do
    set -- $(step "$w1" "$w2" "$b")
    w1=$1 w2=$2 b=$3 loss=$4
    printf '%s %s %s %s\n' "$epoch" "$w1" "$w2" "$b" > "$STATE.tmp"
    mv "$STATE.tmp" "$STATE"
    progress=$(awk -v e="$epoch" -v n="$EPOCHS" 'BEGIN { printf "%.4f", e / n }')
    echo "##gantry {\"epoch\":$epoch,\"epochs\":$EPOCHS,\"progress\":$progress,\"metrics\":{\"loss\":$loss}}"
    echo "epoch $epoch/$EPOCHS loss $loss"
    epoch=$((epoch + 1))
    sleep "$PAUSE"
done

set -- $(step "$w1" "$w2" "$b")
printf '{"model":"linear","features":["x1","x2"],"weights":[%s,%s],"bias":%s,"mse":%s,"epochs":%s,"rows":%s}\n' \
    "$w1" "$w2" "$b" "$4" "$EPOCHS" "$rows" > /outputs/model.json
echo "wrote /outputs/model.json: y = $w1*x1 + $w2*x2 + $b (mse $4)"
