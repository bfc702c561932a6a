"""Layer and optimizer numerics against flax.nnx.

``run(nnx)`` is written once against the flax.nnx API and runs with either
library: the same seeds must give the same initial parameters, outputs,
running statistics, dropout masks, decode results and optimizer steps.
``REFERENCE`` holds a summary of each result (shape, sum, sum of absolute
values, first values) recorded with flax.nnx 0.12.8 (jax 0.10.2, optax 0.2.8,
CPU). On that machine every result was bitwise identical; the comparison here
allows float32 rounding so it holds on other CPUs. Regenerate with

    python tests/test_nn_parity.py      # in an environment with flax installed
"""

import jax.numpy as jnp
import numpy as np
import optax

from nnx_eqx.testing import assert_trees_close


def run(nnx):
  out = {}
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.standard_normal((2, 5, 5, 4)), jnp.float32)
  seq = jnp.asarray(rng.standard_normal((2, 4, 8)), jnp.float32)

  def r():
    return nnx.Rngs(0)

  lin = nnx.Linear(4, 3, rngs=r())
  out["linear"], out["linear_kernel"] = lin(x), lin.kernel[...]
  out["linear_general"] = nnx.LinearGeneral(8, (2, 4), rngs=r())(seq)
  out["conv"] = nnx.Conv(4, 3, (3, 3), rngs=r())(x)
  out["conv_circular"] = nnx.Conv(4, 3, (3, 3), padding="CIRCULAR", kernel_dilation=2, rngs=r())(x)
  out["conv_transpose"] = nnx.ConvTranspose(4, 3, (3, 3), strides=2, rngs=r())(x)
  emb = nnx.Embed(10, 4, rngs=r())
  out["embed"], out["attend"] = emb(jnp.array([[1, 9], [0, 3]])), emb.attend(x[0, 0])
  bn = nnx.BatchNorm(4, rngs=r())
  out["bn_train"] = bn(x)
  out["bn_mean"], out["bn_var"] = bn.mean[...], bn.var[...]
  out["bn_eval"] = bn(x, use_running_average=True)
  out["layer_norm"] = nnx.LayerNorm(4, rngs=r())(x)
  out["rms_norm"] = nnx.RMSNorm(4, rngs=r())(x)
  out["group_norm"] = nnx.GroupNorm(4, num_groups=2, rngs=r())(x)
  drop = nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=3))
  out["dropout_1"], out["dropout_2"] = drop(x), drop(x)
  mha = nnx.MultiHeadAttention(2, 8, rngs=r(), decode=False)
  out["mha"] = mha(seq)
  causal = mha(seq, mask=nnx.make_causal_mask(jnp.ones((2, 4))))
  mha.init_cache(seq.shape)
  decoded = jnp.concatenate([mha(seq[:, i : i + 1], decode=True) for i in range(4)], 1)
  out["mha_causal"], out["mha_decode"] = causal, decoded
  for name in ["LSTMCell", "GRUCell", "SimpleCell"]:
    cell = getattr(nnx, name)(8, 5, rngs=r())
    carry = cell.initialize_carry((2, 8), rngs=nnx.Rngs(0))
    ys = []
    for t in range(4):
      carry, y = cell(carry, seq[:, t])
      ys.append(y)
    out[name] = jnp.stack(ys)
  out["avg_pool"] = nnx.avg_pool(x, (2, 2), (2, 2), padding="SAME", count_include_pad=False)
  out["max_pool"] = nnx.max_pool(x, (3, 3), padding="SAME")
  model = nnx.Linear(4, 3, rngs=r())
  opt = nnx.Optimizer(model, optax.adamw(1e-2), wrt=nnx.Param)

  @nnx.jit
  def step(model, opt, x):
    loss, grads = nnx.value_and_grad(lambda m: (m(x) ** 2).mean())(model)
    opt.update(model, grads)
    return loss

  out["optimizer_losses"] = jnp.stack([step(model, opt, x) for _ in range(5)])
  out["optimizer_kernel"] = model.kernel[...]
  return {k: np.asarray(v, np.float64) for k, v in out.items()}


def summarize(results):
  return {
    k: [list(v.shape), float(v.sum()), float(np.abs(v).sum()), v.ravel()[:3].tolist()]
    for k, v in sorted(results.items())
  }


# fmt: off
REFERENCE = {'GRUCell': [[4, 2, 5],
             0.26666951924562454,
             9.16470853984356,
             [-0.666114091873169, -0.25373396277427673, -0.12765808403491974]],
 'LSTMCell': [[4, 2, 5],
              2.587700675765518,
              6.6311344126588665,
              [-0.24654540419578552, -0.17571178078651428, -0.0455237552523613]],
 'SimpleCell': [[4, 2, 5],
                -1.9349233843386173,
                27.035831306129694,
                [0.796409010887146, 0.4132978916168213, 0.9070267677307129]],
 'attend': [[5, 10],
            10.219194814562798,
            36.86644761264324,
            [-0.17802822589874268, 0.08435355126857758, -0.17635831236839294]],
 'avg_pool': [[2, 3, 3, 4],
              -1.906549908220768,
              39.1110709682107,
              [0.09124907851219177, 0.4224914610385895, 0.1339321732521057]],
 'bn_eval': [[2, 5, 5, 4],
             3.0275163990445435,
             156.23322227178141,
             [0.12580540776252747, -0.13326846063137054, 0.6418130397796631]],
 'bn_mean': [[4],
             0.0006105253869463922,
             0.0034672644851525547,
             [1.2491846064222045e-05, 0.0009689941070973873, -0.0014283695491030812]],
 'bn_train': [[2, 5, 5, 4],
              3.6187702789902687e-07,
              163.34593071456766,
              [0.1342555433511734, -0.272325336933136, 0.7790460586547852]],
 'bn_var': [[4],
            3.996554136276245,
            3.996554136276245,
            [0.9985967874526978, 0.997071385383606, 1.0001083612442017]],
 'conv': [[2, 5, 5, 3],
          0.08388634980656207,
          115.59847198217176,
          [0.09479367733001709, -0.25724563002586365, -0.0009140146430581808]],
 'conv_circular': [[2, 5, 5, 3],
                   -5.522906837519258,
                   137.91723097627982,
                   [1.1195319890975952, 0.7397456765174866, 1.9974108934402466]],
 'conv_transpose': [[2, 10, 10, 3],
                    -1.560695499414578,
                    233.83343746117316,
                    [-0.03874032944440842, 0.2672002613544464, -0.15494216978549957]],
 'dropout_1': [[2, 5, 5, 4], 8.174326825886965, 167.69903488084674, [0.0, 0.0, 0.0]],
 'dropout_2': [[2, 5, 5, 4],
               -6.058638598769903,
               154.5623224787414,
               [0.2514604330062866, -0.26420971751213074, 1.280845284461975]],
 'embed': [[2, 2, 4],
           -2.220546767115593,
           8.579100862145424,
           [-0.4356164038181305, 0.2944190502166748, 0.36196497082710266]],
 'group_norm': [[2, 5, 5, 4],
                4.202127456665039e-06,
                163.05157266557217,
                [0.21224328875541687, -0.0806780457496643, 0.40979325771331787]],
 'layer_norm': [[2, 5, 5, 4],
                -8.377246558666229e-07,
                172.88456728076562,
                [-0.2093091905117035, -1.1239029169082642, 1.6164098978042603]],
 'linear': [[2, 5, 5, 3],
            -16.76734682917595,
            144.28681208193302,
            [0.3008299469947815, -0.42001575231552124, 0.4554370641708374]],
 'linear_general': [[2, 4, 2, 4],
                    -9.472066313028336,
                    60.11343929171562,
                    [-1.710438847541809, 1.7825473546981812, -0.2187921404838562]],
 'linear_kernel': [[4, 3],
                   -1.9681245535612106,
                   6.285183623433113,
                   [0.5350888967514038, -0.4848635494709015, -0.40222620964050293]],
 'max_pool': [[2, 5, 5, 4],
              250.5282138735056,
              251.165113940835,
              [0.9034701585769653, 1.3664634227752686, 1.3040000200271606]],
 'mha': [[2, 4, 8],
         2.302675023674965,
         44.74834831058979,
         [1.4471027851104736, -0.9124375581741333, -0.5818467736244202]],
 'mha_causal': [[2, 4, 8],
                0.3155154511332512,
                46.517803974449635,
                [-0.10122609883546829, -1.0010960102081299, -0.03140217065811157]],
 'mha_decode': [[2, 4, 8],
                0.3155154511332512,
                46.517803974449635,
                [-0.10122609883546829, -1.0010960102081299, -0.03140217065811157]],
 'optimizer_kernel': [[4, 3],
                      -1.8680200763046741,
                      5.686642628163099,
                      [0.485168993473053, -0.43497326970100403, -0.3524072766304016]],
 'optimizer_losses': [[5],
                      6.39262580871582,
                      6.39262580871582,
                      [1.3687219619750977, 1.3224811553955078, 1.2773765325546265]],
 'rms_norm': [[2, 5, 5, 4],
              5.57789576984942,
              170.82955121062696,
              [0.3730321228504181, -0.3919451832771301, 1.9000859260559082]]}
# fmt: on


def test_same_numbers_as_flax_nnx():
  import nnx_eqx

  ours = summarize(run(nnx_eqx))
  assert sorted(ours) == sorted(REFERENCE)
  mismatches = []
  for name, (shape, total, abs_total, head) in REFERENCE.items():
    got_shape, got_total, got_abs, got_head = ours[name]
    f32 = np.float32
    try:  # float32 results of another program (flax): the policy's float32 tolerance
      assert got_shape == shape
      assert_trees_close(f32(got_abs), f32(abs_total))
      # a signed sum cancels: its error scales with the sum of magnitudes
      assert_trees_close(f32(got_total), f32(total), atol=max(1e-6, 1e-5 * abs_total))
      assert_trees_close(np.asarray(got_head, f32), np.asarray(head, f32))
    except AssertionError:
      mismatches.append(f"{name}: flax {REFERENCE[name]}, nnx_eqx {ours[name]}")
  assert not mismatches, "\n".join(mismatches)


if __name__ == "__main__":
  import pprint

  import flax
  from flax import nnx as flax_nnx

  print(f"# flax {flax.__version__}")
  pprint.pprint(summarize(run(flax_nnx)), width=100, sort_dicts=True)
