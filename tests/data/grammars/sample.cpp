// A tiny matrix class, written to exercise the grammar queries.
#include <algorithm>
#include <vector>

namespace linalg {

class Matrix {
public:
    Matrix(int rows, int cols) : rows_(rows), cols_(cols), data_(rows * cols, 0.0) {}

    double &at(int r, int c) { return data_[r * cols_ + c]; }

    Matrix transposed() const;

    void fill(double value) {
        std::fill(data_.begin(), data_.end(), value);
    }

private:
    int rows_;
    int cols_;
    std::vector<double> data_;
};

Matrix Matrix::transposed() const {
    Matrix out(cols_, rows_);
    for (int r = 0; r < rows_; ++r) {
        for (int c = 0; c < cols_; ++c) {
            out.at(c, r) = at(r, c);
        }
    }
    return out;
}

template <typename T>
T clamp_all(std::vector<T> &values, T lo, T hi) {
    auto clamp_one = [&](T &v) {
        v = std::max(lo, std::min(v, hi));
    };
    std::for_each(values.begin(), values.end(), clamp_one);
    return values.empty() ? lo : values.front();
}

}  // namespace linalg
