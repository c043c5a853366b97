//===- md_lj.cpp - molecular dynamics in C++ on an exported segops model ----===//
//
//   md_lj LJ.pt2 PROGRAMS_DIR [ATOMS=4000] [STEPS=1000] [EVERY=10] [DT=0.005]
//
// Velocity Verlet on the Lennard-Jones system of bench/message_passing.py
// (an fcc lattice at density 0.8442, atoms displaced by up to 0.05 sigma,
// starting at temperature 0.1), calling the exported energy-and-forces
// model (models.py's LennardJones, a segops.jit function) every step, as
// LAMMPS's pair_nequip calls a .pt2. The neighbour list (full, with
// minimum-image shifts, within the cutoff plus a skin) is rebuilt here
// every EVERY steps. Prints the total energy per atom as it goes and, at
// the end, its drift: the test asks for less than 1e-4 per atom over 1,000
// steps in float64. Lennard-Jones units, unit masses.
//
//===----------------------------------------------------------------------===//

#include "segops_deploy.h"

#include <ATen/ATen.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr double kDensity = 0.8442;
constexpr double kCutoff = 2.5; // models.py's CUTOFF
constexpr double kSkin = 0.3;
constexpr double kTemperature = 0.1;

struct System {
  int64_t atoms = 0;
  double box = 0;
  std::vector<double> x, v; // (atoms, 3), row-major
};

/// 4 n^3 atoms on an fcc lattice, displaced by up to 0.05, with Maxwell
/// velocities at kTemperature and no net momentum.
System fccSystem(int64_t atoms) {
  auto cells = static_cast<int64_t>(std::lround(std::cbrt(atoms / 4.0)));
  if (4 * cells * cells * cells != atoms)
    throw std::invalid_argument("an fcc box holds 4 n^3 atoms");
  const double lattice = std::cbrt(4.0 / kDensity);
  const double basis[4][3] = {
      {0, 0, 0}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5}};
  System system;
  system.atoms = atoms;
  system.box = cells * lattice;
  std::mt19937_64 random(0);
  std::uniform_real_distribution<double> displacement(-0.05, 0.05);
  std::normal_distribution<double> velocity(0.0, std::sqrt(kTemperature));
  for (int64_t a = 0; a < cells; ++a)
    for (int64_t b = 0; b < cells; ++b)
      for (int64_t c = 0; c < cells; ++c)
        for (const auto &site : basis) {
          const int64_t cell[3] = {a, b, c};
          for (int k = 0; k < 3; ++k)
            system.x.push_back((cell[k] + site[k]) * lattice +
                               displacement(random));
        }
  double momentum[3] = {0, 0, 0};
  for (int64_t n = 0; n < atoms; ++n)
    for (int k = 0; k < 3; ++k) {
      system.v.push_back(velocity(random));
      momentum[k] += system.v.back();
    }
  for (int64_t n = 0; n < atoms; ++n)
    for (int k = 0; k < 3; ++k)
      system.v[3 * n + k] -= momentum[k] / atoms;
  return system;
}

/// A full neighbour list: receivers i (sorted), senders j and the
/// minimum-image shift of each edge (x[j] - x[i] + shift is the pair
/// vector), for pairs within kCutoff + kSkin. O(N^2): a cell list pays
/// off at larger N.
struct NeighbourList {
  at::Tensor i, j, shift;
  std::vector<double> builtAt; // positions when built
};

NeighbourList buildNeighbourList(const System &system) {
  const double reach2 = (kCutoff + kSkin) * (kCutoff + kSkin);
  const int64_t atoms = system.atoms;
  std::vector<std::vector<std::pair<int64_t, std::array<double, 3>>>> pairs(
      atoms);
  for (int64_t a = 0; a < atoms; ++a)
    for (int64_t b = a + 1; b < atoms; ++b) {
      std::array<double, 3> shift;
      double r2 = 0;
      for (int k = 0; k < 3; ++k) {
        double d = system.x[3 * b + k] - system.x[3 * a + k];
        shift[k] = -system.box * std::nearbyint(d / system.box);
        r2 += (d + shift[k]) * (d + shift[k]);
      }
      if (r2 >= reach2)
        continue;
      pairs[a].push_back({b, shift});
      pairs[b].push_back({a, {-shift[0], -shift[1], -shift[2]}});
    }
  int64_t edges = 0;
  for (const auto &row : pairs)
    edges += static_cast<int64_t>(row.size());
  NeighbourList list;
  list.i = at::empty({edges}, at::kLong);
  list.j = at::empty({edges}, at::kLong);
  list.shift = at::empty({edges, 3}, at::kDouble);
  int64_t *i = list.i.data_ptr<int64_t>(), *j = list.j.data_ptr<int64_t>();
  double *shift = list.shift.data_ptr<double>();
  int64_t e = 0;
  for (int64_t a = 0; a < atoms; ++a)
    for (const auto &[b, s] : pairs[a]) {
      i[e] = a, j[e] = b;
      std::copy(s.begin(), s.end(), shift + 3 * e);
      ++e;
    }
  list.builtAt = system.x;
  return list;
}

/// The largest distance an atom moved since the list was built.
double largestMove(const System &system, const NeighbourList &list) {
  double largest2 = 0;
  for (int64_t n = 0; n < system.atoms; ++n) {
    double r2 = 0;
    for (int k = 0; k < 3; ++k) {
      double d = system.x[3 * n + k] - list.builtAt[3 * n + k];
      r2 += d * d;
    }
    largest2 = std::max(largest2, r2);
  }
  return std::sqrt(largest2);
}

double kineticEnergy(const System &system) {
  double sum = 0;
  for (double v : system.v)
    sum += v * v;
  return 0.5 * sum;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3 || argc > 7) {
    std::cerr << "usage: " << argv[0]
              << " LJ.pt2 PROGRAMS_DIR [ATOMS=4000] [STEPS=1000] [EVERY=10] "
                 "[DT=0.005]\n";
    return 2;
  }
  try {
    const int64_t atoms = argc > 3 ? std::stoll(argv[3]) : 4000;
    const int64_t steps = argc > 4 ? std::stoll(argv[4]) : 1000;
    const int64_t every = argc > 5 ? std::stoll(argv[5]) : 10;
    const double dt = argc > 6 ? std::stod(argv[6]) : 0.005;
    segops::loadPrograms(argv[2]);
    torch::inductor::AOTIModelPackageLoader model(argv[1]);

    System system = fccSystem(atoms);
    NeighbourList list = buildNeighbourList(system);
    // The model's positions share the integrator's memory.
    at::Tensor positions = at::from_blob(system.x.data(), {atoms, 3},
                                         at::TensorOptions(at::kDouble));
    auto evaluate = [&](std::vector<double> &forces) {
      std::vector<at::Tensor> outputs =
          model.run({positions, list.i, list.j, list.shift});
      at::Tensor f = outputs.at(1).contiguous();
      std::copy(f.data_ptr<double>(), f.data_ptr<double>() + 3 * atoms,
                forces.begin());
      return outputs.at(0).item<double>();
    };

    std::vector<double> forces(3 * atoms);
    const double initial = evaluate(forces) + kineticEnergy(system);
    double largestDeviation = 0, unsafeMove = 0;
    auto start = std::chrono::steady_clock::now();
    double total = initial;
    std::printf("atoms %lld, edges %lld, dt %g, list every %lld steps\n",
                static_cast<long long>(atoms),
                static_cast<long long>(list.i.size(0)), dt,
                static_cast<long long>(every));
    std::printf("step %5d  energy/atom %.10f\n", 0, initial / atoms);
    for (int64_t step = 1; step <= steps; ++step) {
      for (int64_t k = 0; k < 3 * atoms; ++k) {
        system.v[k] += 0.5 * dt * forces[k];
        system.x[k] += dt * system.v[k];
      }
      if (step % every == 0) {
        // A pair can cross into the cutoff unseen only if atoms moved more
        // than half the skin since the list was built.
        unsafeMove = std::max(unsafeMove, largestMove(system, list));
        list = buildNeighbourList(system);
      }
      double potential = evaluate(forces);
      for (int64_t k = 0; k < 3 * atoms; ++k)
        system.v[k] += 0.5 * dt * forces[k];
      total = potential + kineticEnergy(system);
      largestDeviation =
          std::max(largestDeviation, std::abs(total - initial) / atoms);
      if (step % 100 == 0)
        std::printf("step %5lld  energy/atom %.10f\n",
                    static_cast<long long>(step), total / atoms);
    }
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    std::printf("largest move between lists %.4f (half the skin: %.4f)\n",
                unsafeMove, kSkin / 2);
    std::printf("%.2f ms per step\n", 1e3 * seconds / steps);
    std::printf("drift_per_atom %.3e max_deviation_per_atom %.3e\n",
                (total - initial) / atoms, largestDeviation);
    if (unsafeMove > kSkin / 2) {
      std::cerr << "md_lj: atoms moved more than half the skin between "
                   "lists; rebuild more often\n";
      return 1;
    }
  } catch (const c10::Error &error) { // without the C++ backtrace
    std::cerr << "md_lj: " << error.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception &error) {
    std::cerr << "md_lj: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
