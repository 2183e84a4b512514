// Trains the "small" benchmark model — Conv1D(128, 40, strides=4, 'same') ->
// GlobalAveragePooling1D -> Dropout(0.5) -> Dense(64, relu) -> Dense(1, sigmoid) — on a
// frequency-detection task generated in code, with Adam and binary cross-entropy, batch
// (32, 140, 30). Prints loss and accuracy per epoch and the held-out accuracy.
//
//   train_small [--epochs 8] [--train 2048] [--lr 1e-3] [--device cpu|cuda]
#include <cstdio>

#include "common.h"
#include "encore.h"

using namespace encore;

int main(int argc, char** argv) {
  const examples::Args args(argc, argv, {"epochs", "train", "lr", "device"});
  return examples::guarded(args, [&] {
    const Device device = examples::pick_device(args);
    const int64_t epochs = args.num("epochs", 8), n_train = args.num("train", 2048), batch = 32;
    manual_seed(0);
    const auto train = examples::make_frequency_task(n_train, 140, 30, 1, device);
    const auto test = examples::make_frequency_task(512, 140, 30, 2, device);

    nn::Sequential model;
    model.add<nn::Conv1D>(128, 40, nn::Conv1DOptions{.strides = 4, .padding = "same"});
    model.add<nn::GlobalAveragePooling1D>();
    model.add<nn::Dropout>(0.5);
    model.add<nn::Dense>(64, nn::DenseOptions{.activation = "relu"});
    model.add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
    std::printf("%s", model.summary({batch, 140, 30}).c_str());
    model.to(device);
    nn::Adam adam(model.parameters(), args.real("lr", 1e-3));
    std::printf("training on %s: %lld samples, batch %lld\n", device.str().c_str(),
                static_cast<long long>(n_train), static_cast<long long>(batch));

    const int64_t steps = n_train / batch;
    for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
      const auto t0 = std::chrono::steady_clock::now();
      double loss_sum = 0, acc_sum = 0;
      set_training(true);
      for (int64_t s = 0; s < steps; ++s) {
        const Tensor x = examples::rows(train.x, s * batch, batch),
                     y = examples::rows(train.y, s * batch, batch);
        adam.zero_grad();
        const Tensor p = model(x);
        const Tensor loss = nn::binary_crossentropy(y, p);
        loss.backward();
        adam.step();
        loss_sum += loss.item();
        acc_sum += nn::binary_accuracy(y, p);
        std::printf("\r  epoch %lld  step %3lld/%lld  loss %.4f", static_cast<long long>(epoch),
                    static_cast<long long>(s + 1), static_cast<long long>(steps),
                    loss_sum / (s + 1));
        std::fflush(stdout);
      }
      set_training(false);
      const double test_acc = nn::binary_accuracy(test.y, model(test.x));
      std::printf("\r  epoch %lld  loss %.4f  accuracy %.3f  held-out accuracy %.3f  (%.1f s)\n",
                  static_cast<long long>(epoch), loss_sum / steps, acc_sum / steps, test_acc,
                  examples::seconds_since(t0));
    }
    set_training(false);
    const double acc = nn::binary_accuracy(test.y, model(test.x));
    std::printf("final held-out accuracy: %.3f\n", acc);
    return acc >= 0.95 ? 0 : 1;
  });
}
