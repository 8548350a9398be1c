#include "spec/act_scale_rule.hpp"

namespace moejit {

bool act_scale_fits(DType act, ActScale scale) {
  switch (act) {
    case DType::e4m3: return scale == ActScale::token || scale == ActScale::block128;
    case DType::e2m1: return scale == ActScale::block32;
    default: return scale == ActScale::none;
  }
}

std::string_view act_scales_for(DType act) {
  switch (act) {
    case DType::e4m3: return "token or block128";
    case DType::e2m1: return "block32";
    default: return "none";
  }
}

}  // namespace moejit
