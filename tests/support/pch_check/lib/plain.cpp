#include <vector>
int plain_size() { return static_cast<int>(std::vector<int>(1).size()); }
