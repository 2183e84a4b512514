// Trains an LSTM on the adding problem (sum of the two marked values in a sequence of 50).
// Predicting the mean gives MSE ~0.167; an LSTM that learned the task goes far below.
//
//   train_lstm [--steps 1500] [--units 32] [--length 50] [--device cpu|cuda]
#include <cstdio>

#include "common.h"
#include "encore.h"

using namespace encore;

int main(int argc, char** argv) {
  const examples::Args args(argc, argv, {"steps", "length", "units", "lr", "device"});
  return examples::guarded(args, [&] {
    const Device device = examples::pick_device(args);
    const int64_t steps = args.num("steps", 1500), length = args.num("length", 50), batch = 32;
    manual_seed(0);
    const auto test = examples::make_adding_task(512, length, 99, device);

    nn::Sequential model;
    model.add<nn::LSTM>(args.num("units", 32));
    model.add<nn::Dense>(1);
    std::printf("%s", model.summary({batch, length, 2}).c_str());
    model.to(device);
    nn::Adam adam(model.parameters(), args.real("lr", 1e-2));

    const auto t0 = std::chrono::steady_clock::now();
    double running = 0;
    for (int64_t step = 1; step <= steps; ++step) {
      const auto data =
          examples::make_adding_task(batch, length, static_cast<uint32_t>(step), device);
      adam.zero_grad();
      const Tensor loss = nn::mean_squared_error(data.y, model(data.x));
      loss.backward();
      adam.step();
      running = step == 1 ? loss.item() : 0.98 * running + 0.02 * loss.item();
      if (step % 50 == 0 || step == steps) {
        std::printf("\r  step %5lld/%lld  loss %.5f  (%.1f s)", static_cast<long long>(step),
                    static_cast<long long>(steps), running, examples::seconds_since(t0));
        std::fflush(stdout);
      }
      if (step % 500 == 0) std::printf("\n");
    }
    const double mse = nn::mean_squared_error(test.y, model(test.x)).item();
    std::printf("\nheld-out MSE %.5f (predicting the mean: ~0.167)\n", mse);
    return mse < 0.05 ? 0 : 1;
  });
}
