#include <vector>
int own_size() { return static_cast<int>(std::vector<int>(2).size()); }
